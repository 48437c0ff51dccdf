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
    return {"name": name, "kind": kind, "problem": "n=268435456 float32", "median_us": us, "min_us": us * 0.97,
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
    assert [round(p.get_height(), 1) for p in bytes_ax.patches] == [4, 4, 9, 6, 4.2, 0]     # MB
    assert "OP/B" in oi_ax.get_ylabel() and bytes_ax.get_yscale() == "log"
    legend = [t.get_text() for t in bytes_ax.get_legend().get_texts()]
    assert legend == ["book model", "requested at L1 (CPU engine)", "DRAM (Nsight Compute)"]
    assert LABEL in texts(fig)


def test_title_names_the_device_from_the_label():
    fig = plots.plot_variants(ENTRIES, title="Reduction, n=2^28", label=LABEL)
    assert fig._suptitle.get_text() == "Reduction, n=2^28 — NVIDIA H100 80GB HBM3"
    ax = plots.roofline(ENTRIES, CEILINGS, title="Reduction roofline", label=LABEL).axes[0]
    assert "NVIDIA H100 80GB HBM3" in ax.get_title()
    # named once where the title names it already; the CPU engine named for CPU timings
    fig = plots.plot_variants(ENTRIES, title="on the NVIDIA H100 80GB HBM3", label=LABEL)
    assert fig._suptitle.get_text() == "on the NVIDIA H100 80GB HBM3"
    fig = plots.plot_variants([entry("01_simple", clock="cpu wall clock")], title="t")
    assert fig._suptitle.get_text() == "t — CPU engine"
    ncu = "DRAM and GPU counters: Nsight Compute on NVIDIA H100 80GB HBM3, 2026-11-25 (commit 302d5cd)"
    assert plots.device_of(ncu) == "NVIDIA H100 80GB HBM3"
    assert "NVIDIA H100 80GB HBM3" in plots.bytes_three_ways(TRAFFIC, title="t", label=ncu)._suptitle.get_text()


def to_beat_lines(fig):
    return [l for ax in fig.axes for l in ax.get_lines() if l.get_label().startswith("to beat")]


def test_to_beat_is_a_library_routine_of_the_same_problem_only():
    text, uniform = "n=268435456 bytes of English text, 7 bins", "n=268435456 uniform random bytes, 256 bins"
    es = [dict(entry("05_contiguous", us=300), problem=text), dict(entry("12_register_counts", us=124), problem=text),
          dict(entry("11_per_lane", us=102), problem=uniform), dict(entry("torch.bincount", "library", 1627), problem=uniform)]
    (best, kernels), = plots.to_beat(es)
    assert best["name"] == "torch.bincount" and kernels == [2]
    (line,) = to_beat_lines(plots.plot_variants(es, title="t"))
    assert list(line.get_xdata()) == [2 - 0.45, 2 + 0.45]     # over 11_per_lane, not over the 7-bin bars


def test_to_beat_keeps_tf32_library_routines_off_fp32_kernels():
    fp32, tf32 = "N=8 C=64 H=128 W=128 K=128 3x3 stride 1 pad 1 fp32", "N=8 C=64 H=128 W=128 K=128 3x3 stride 1 pad 1 tf32"
    es = [dict(entry("07_rsc_order", us=515), problem=fp32), dict(entry("08_tf32_mma", us=261), problem=tf32),
          dict(entry("cuDNN FP32 (torch conv2d)", "library", 473), problem=fp32),
          dict(entry("cuDNN TF32 (torch conv2d)", "library", 148), problem=fp32)]
    assert plots.precision(es[3]) == "tf32" and plots.precision(es[2]) == "float32"
    pairs = {best["name"]: kernels for best, kernels in plots.to_beat(es)}
    assert pairs == {"cuDNN FP32 (torch conv2d)": [0], "cuDNN TF32 (torch conv2d)": [1]}
    # only FP32 kernels plotted: the TF32 routine is a hatched bar, not their line
    fp32_only = [es[0], es[2], es[3]]
    (line,) = to_beat_lines(plots.plot_variants(fp32_only, title="t"))
    assert "cuDNN FP32" in line.get_label() and line.get_ydata()[0] == 473


def test_plot_problems_draws_one_panel_per_problem_with_its_own_bar_to_beat():
    fwd = [dict(entry("02_2x_forward", us=27), problem="forward float32"), dict(entry("torch", "library", 50), problem="forward float32")]
    bwd = [dict(entry("07_coalesced", us=16), problem="backward float16"), dict(entry("torch", "library", 33), problem="backward float16")]
    fig = plots.plot_problems({"forward, float32": fwd, "backward, float16": bwd}, title="Upsample", label=LABEL)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["forward, float32", "backward, float16"]
    assert sorted(l.get_ydata()[0] for l in to_beat_lines(fig)) == [33, 50]
    assert "NVIDIA H100 80GB HBM3" in fig._suptitle.get_text()


def test_roofline_labels_of_close_points_do_not_overlap():
    close = [entry(f"0{k}_variant_with_a_long_name", intensity=0.25 * (1 + 0.02 * k), gflops=200 * (1 + 0.03 * k))
             for k in range(6)]
    spots = plots.place_labels([(e["intensity"], e["gflops"], e["name"]) for e in close], (0.05, 20), (10, 1.5e5))
    assert len({s[:2] for s in spots}) == len(close)       # six close points, six different spots
    fig = plots.roofline(close, CEILINGS, title="t")
    assert len(fig.axes[0].get_legend().get_texts()) >= 3 and len(fig.legends) == 0   # one legend, in the axes


def test_long_tick_labels_are_wrapped_and_rotated():
    es = ENTRIES + [entry("cupyx.scipy.ndimage.correlate with a long tail", "library", 300)]
    ax = plots.plot_variants(es, title="t").axes[0]
    ticks = ax.get_xticklabels()
    assert "\n" in ticks[-1].get_text() and ticks[0].get_rotation() == 45


def test_a_noisy_row_is_marked_and_its_error_bar_is_the_quartiles():
    steady = {**entry("02_steady", us=500), "q1_us": 490.0, "q3_us": 520.0}
    shaky = {**entry("01_shaky", us=900), "min_us": 500.0, "noisy": True}
    fig = plots.plot_variants([shaky, steady], title="t")
    ax = fig.axes[0]
    assert "noisy" in texts(fig) and [p.get_hatch() for p in ax.patches] == ["xx", None]
    assert plots.spread_bars([steady, shaky]) == [[10.0, 0.0], [20.0, 0.0]]   # no quartiles: no bar


def test_long_names_wrap_after_a_separator_never_inside_a_word():
    assert plots.wrap_name("cupyx.scipy.ndimage.correlate") == "cupyx.scipy.ndimage.\ncorrelate"
    assert plots.wrap_name("01_basic") == "01_basic"
    for line in plots.wrap_name("torch conv2d (cuDNN, FP32) on a long problem name").splitlines():
        assert len(line) <= 24


def test_log_time_axes_read_in_plain_numbers():
    fig = plots.plot_variants([entry("slow", us=90000), entry("fast", us=100)], title="t")
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert labels and all("^" not in t and "times" not in t for t in labels), labels
    assert "1,000" in labels or "10,000" in labels


def test_roof_bars_put_each_gpu_beside_the_other_against_its_own_roof():
    fig = plots.roof_bars(["05_coarsened", "cub::DeviceReduce"], {"H100": [101.0, 84.0], "H200": [73.0, None]},
                          title="Reduction", roof="read bandwidth", spreads={"H100": [(100.0, 102.0), (83.0, 85.0)],
                                                                             "H200": [(72.0, 74.0), None]},
                          noisy={"H100": [True, False], "H200": [False, False]}, library=["cub::DeviceReduce"],
                          goal=98.0, goal_label="goal: 98% of the roof")
    ax = fig.axes[0]
    widths = sorted(round(p.get_width()) for p in ax.patches)
    assert widths == [73, 84, 101]
    said = texts(fig)
    assert "101% noisy" in said and "84%" in said and "not recorded on the H200" in said
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "H100", "H200", "goal: 98% of the roof", "the roof: each GPU's read bandwidth"]
    assert any(p.get_hatch() == "//" for p in ax.patches) and any(p.get_hatch() == "xx" for p in ax.patches)


def test_a_sweep_draws_a_line_per_gpu_and_each_gpus_bar_to_beat():
    fig = plots.sweep(["1", "2", "4"], {"H100": [None, 500.0, 350.0], "H200": [1064.0, 570.0, 338.0]},
                      title="COARSE_FACTOR", xlabel="COARSE_FACTOR",
                      bars={"H200": ("cub::DeviceReduce", 250.0)})
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["cub::DeviceReduce on the H200 (250 µs)", "H100", "H200"] or set(legend) == {
        "H100", "H200", "cub::DeviceReduce on the H200 (250 µs)"}
    assert ax.get_ylim()[0] == 0
