"""pmpp.plots: figures for synthetic entries have the titles, labels and artists a reader needs."""
import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.figure import Figure

from pmpp import plots
from pmpp.device import Ceilings

LABEL = "recorded on NVIDIA H100 80GB HBM3, 2026-11-21 (commit abc1234)"
CEILINGS = {"copy_gbs": 3000.0, "fp32_gflops": 50000.0, "peak_bw_gbs": 3352.0, "peak_fp32_gflops": 66908.0}


def entry(name, kind="variant", us=100.0, intensity=0.25, gflops=200.0, correct=True, clock="cuda events"):
    return {"name": name, "kind": kind, "problem": "n=268435456 float32", "median_us": us, "min_us": us * 0.9,
            "max_us": us * 1.2, "gbps": 1000.0, "gflops": gflops, "intensity": intensity,
            "correct": correct, "clock": clock}


ENTRIES = [entry("01_simple", us=900, gflops=80), entry("02_convergent", us=500, gflops=150),
           entry("03_shared", us=250, gflops=300, correct=False), entry("cupy.sum (CUB)", "library", 200, gflops=380)]


def texts(fig):
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def test_plot_variants_draws_the_time_per_variant():
    fig = plots.plot_variants(ENTRIES, title="Reduction, n=2^28")
    assert isinstance(fig, Figure)
    (time_ax,) = fig.axes
    assert "µs" in time_ax.get_ylabel()
    assert fig._suptitle.get_text() == "Reduction, n=2^28"
    assert [t.get_text() for t in time_ax.get_xticklabels()] == [e["name"] for e in ENTRIES]
    assert [round(p.get_height()) for p in time_ax.patches] == [900, 500, 250, 200]


def test_library_routine_is_the_hatched_bar_to_beat():
    time_ax = plots.plot_variants(ENTRIES, title="t").axes[0]
    assert [bool(p.get_hatch()) for p in time_ax.patches] == [False, False, False, True]
    lines = [l for l in time_ax.get_lines() if l.get_label().startswith("to beat")]
    assert len(lines) == 1 and lines[0].get_ydata()[0] == 200
    assert "cupy.sum (CUB)" in lines[0].get_label()


def test_wrong_variant_is_marked():
    fig = plots.plot_variants(ENTRIES, title="t")
    assert "wrong" in texts(fig)


def test_recorded_label_is_shown():
    assert LABEL in texts(plots.plot_variants(ENTRIES, title="t", label=LABEL))
    assert LABEL in texts(plots.roofline(ENTRIES, CEILINGS, title="t", label=LABEL))


def test_cpu_timings_are_labeled_as_such():
    fig = plots.plot_variants([entry("01_simple", clock="cpu wall clock")], title="t")
    assert any("CPU engine timings" in t for t in texts(fig))


def test_roofline_is_log_log_with_named_roofs():
    fig = plots.roofline(ENTRIES, CEILINGS, title="Reduction roofline")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "Reduction roofline"
    assert "OP/B" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    all_text = " ".join(texts(fig))
    assert "copy 3,000 GB/s" in all_text and "FP32 FMA 50,000 GFLOP/s" in all_text
    roof = ax.get_lines()[0]
    assert roof.get_ydata()[1] == 50000.0 and roof.get_xdata()[1] == pytest.approx(50000 / 3000)


def test_roofline_labels_every_point():
    fig = plots.roofline(ENTRIES, CEILINGS, title="t")
    for e in ENTRIES:
        assert e["name"] in texts(fig)
    points = [l for l in fig.axes[0].get_lines() if l.get_linestyle() == "None"]
    assert sorted(l.get_ydata()[0] for l in points) == [80, 150, 300, 380]


def test_roofline_skips_entries_without_intensity():
    es = ENTRIES + [entry("copy_only", intensity=None, gflops=None)]
    fig = plots.roofline(es, CEILINGS, title="t")
    assert "copy_only" not in texts(fig)


def test_roofline_accepts_a_ceilings_object_and_draws_datasheet_peaks():
    c = Ceilings("H100", 3000.0, 50000.0, 3352.0, 66908.0, "measured on H100, 2026-11-21")
    ax = plots.roofline(ENTRIES, c, title="t").axes[0]
    assert any("datasheet" in l.get_label() for l in ax.get_lines())


def test_roofline_needs_positive_ceilings():
    with pytest.raises(ValueError, match="copy_gbs"):
        plots.roofline(ENTRIES, {"copy_gbs": 0, "fp32_gflops": 1.0}, title="t")


def test_intensity_table_draws_each_series_and_the_ridge():
    fig = plots.plot_intensity_table([8, 16, 32], {"tiled": [2, 4, 8]}, title="OP/B vs tile",
                                     xlabel="tile width (elements)", ridge=16.7)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "tile width (elements)" and "OP/B" in ax.get_ylabel()
    assert [l.get_label() for l in ax.get_lines()] == ["tiled", "ridge point (16.7 OP/B)"]


def test_bars_put_one_bar_per_series_in_each_group_with_the_label():
    fig = plots.plot_bars(["01", "02"], {"model": [28.0, 9.5], "measured": [4.0, 4.1]},
                          title="t", ylabel="bytes per point", label="recorded on X")
    ax = fig.axes[0]
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [4.0, 4.1, 9.5, 28.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["01", "02"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["model", "measured"]
    assert "recorded on X" in fig.get_supxlabel()


TRAFFIC = [{"variant": "01_simple", "model_bytes": 4e6, "requested_bytes": 9e6, "dram_bytes": 4.2e6, "flops": 1e6,
            "model_intensity": 0.25, "requested_intensity": 0.11, "dram_intensity": 0.24},
           {"variant": "02_convergent", "model_bytes": 4e6, "requested_bytes": 6e6, "dram_bytes": None, "flops": 1e6,
            "model_intensity": 0.25, "requested_intensity": 0.17, "dram_intensity": None}]


def test_bytes_three_ways_draws_model_requests_and_dram_per_variant():
    fig = plots.bytes_three_ways(TRAFFIC, title="Reduction at n=2^20", label=LABEL)
    bytes_ax, oi_ax = fig.axes
    assert [t.get_text() for t in bytes_ax.get_xticklabels()] == ["01_simple", "02_convergent"]
    assert [round(p.get_height()) for p in bytes_ax.patches] == [4e6, 4e6, 9e6, 6e6, 4.2e6, 0]
    assert "OP/B" in oi_ax.get_ylabel() and bytes_ax.get_yscale() == "log"
    legend = [t.get_text() for t in bytes_ax.get_legend().get_texts()]
    assert legend == ["book model", "requested at L1 (CPU engine)", "DRAM (Nsight Compute)"]
    assert LABEL in texts(fig)
