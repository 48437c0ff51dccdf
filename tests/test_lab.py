"""pmpp.lab: a chapter's recordings on each GPU side by side, claims only from steady rows."""
import json

import matplotlib

matplotlib.use("Agg")

import pytest

from pmpp import lab, results
from pmpp.lab import Lab, NoisyMeasurement, short_name


def row(name, us, kind="variant", *, low=None, noisy=False, q=True):
    low = low if low is not None else us * 0.99
    entry = {"name": name, "kind": kind, "problem": "n=268435456 float32 sum", "median_us": us, "min_us": low,
             "max_us": us * 1.05, "gbps": 4 * 2 ** 28 / (us * 1e3), "gflops": 1.0, "intensity": 0.25,
             "correct": True, "clock": "cuda events", "noisy": noisy}
    if q:
        entry.update(q1_us=us * 0.995, q3_us=us * 1.01)
    return entry


def recording(folder, device, commit, date, chapters, read_gbs):
    data = {"device": {"name": device}, "versions": {}, "date": date, "commit": commit, "clock": "cuda events",
            "ceilings": {"copy_gbs": read_gbs * 0.97, "read_gbs": read_gbs, "fp32_gflops": 60000.0},
            "chapters": chapters}
    results.validate(data)
    (folder / f"{results.device_slug(device)}-{commit}.json").write_text(json.dumps(data))


@pytest.fixture
def two_gpus(tmp_path):
    recording(tmp_path, "NVIDIA H100 80GB HBM3", "aaaaaaa", "2026-11-26T06:00:00+00:00", {"reduction": [
        row("05_coarsened", 348.5, q=False), row("15_vectorized", 354.7, q=False),
        row("cub::DeviceReduce", 359.3, "library", q=False)]}, 3026.0)
    recording(tmp_path, "NVIDIA H200", "bbbbbbb", "2026-11-29T06:00:00+00:00", {
        "reduction": [row("05_coarsened", 338.4), row("15_vectorized", 250.1), row("13_dot", 900.0, low=600.0, noisy=True),
                      row("cub::DeviceReduce", 250.7, "library")],
        "reduction:coarse_factor": [row("05_coarsened COARSE_FACTOR=4", 338.6), row("05_coarsened COARSE_FACTOR=16", 246.4),
                                    row("cub::DeviceReduce", 249.9, "library")]}, 4336.0)
    return Lab("reduction", directory=tmp_path)


def test_gpus_are_named_short_and_in_the_order_first_recorded(two_gpus):
    assert two_gpus.gpus == ["H100", "H200"]
    assert short_name("NVIDIA GeForce RTX 4090") == "RTX 4090" and short_name("Tesla T4") == "Tesla T4"
    assert short_name("NVIDIA A100-SXM4-80GB") == "A100"


def test_a_speedup_is_two_rows_of_one_run(two_gpus):
    assert two_gpus.speedup("05_coarsened", "15_vectorized", "H200") == pytest.approx(338.4 / 250.1)
    assert two_gpus.speedup("05_coarsened", "15_vectorized", "H100") == pytest.approx(348.5 / 354.7)
    with pytest.raises(KeyError, match="no recording on the H100 has 13_dot"):
        two_gpus.speedup("13_dot", "15_vectorized", "H100")


def test_no_claim_rests_on_a_noisy_row(two_gpus, capsys):
    with pytest.raises(NoisyMeasurement, match="13_dot on the H200 is noisy"):
        two_gpus.speedup("13_dot", "15_vectorized", "H200")
    assert two_gpus.step("13_dot", "15_vectorized") == {}
    out = capsys.readouterr().out
    assert "H100: not recorded" in out and "noisy" in out


def test_a_step_prints_and_returns_each_gpus_speedup(two_gpus, capsys):
    found = two_gpus.step("05_coarsened", "15_vectorized", roof="read_gbs")
    assert found == pytest.approx({"H100": 348.5 / 354.7, "H200": 338.4 / 250.1})
    out = capsys.readouterr().out
    assert "H200: 05_coarsened 338 µs -> 15_vectorized 250 µs, 1.35x (99% of its read bandwidth)" in out


def test_the_table_sets_each_gpu_against_its_own_roof_and_library(two_gpus):
    table = two_gpus.table(["05_coarsened", "15_vectorized", "13_dot"], roof="read_gbs", library="cub::DeviceReduce")
    h200 = table["05_coarsened"]["H200"]
    assert h200["roof"] == pytest.approx(4 * 2 ** 28 / (338.4 * 1e3) / 4336.0)
    assert h200["vs"] == pytest.approx(250.7 / 338.4)
    assert table["13_dot"]["H100"] is None and table["13_dot"]["H200"]["noisy"]
    text = str(table)
    assert "not recorded" in text and "noisy" in text and "H200 x cub::DeviceReduce" in text
    assert "<table>" in table._repr_html_()


def test_roof_bars_and_sweep_draw_every_gpu(two_gpus):
    fig = two_gpus.roof_bars(["05_coarsened", "15_vectorized"], roof="read_gbs", goal=98.0)
    widths = sorted(round(p.get_width()) for p in fig.axes[0].patches)
    assert widths == sorted(round(100 * two_gpus.roof_share(n, g, "read_gbs")) for n in ("05_coarsened", "15_vectorized")
                            for g in ("H100", "H200"))
    fig = two_gpus.sweep("reduction:coarse_factor", parameter="COARSE_FACTOR", library="cub::DeviceReduce")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["4", "16"]


def test_diff_shows_code_lines_not_the_header(capsys):
    Lab("reduction").diff("01_simple", "02_convergent")
    out = capsys.readouterr().out
    assert "+    for (unsigned int stride = blockDim.x; stride >= 1; stride /= 2) {" in out
    assert "// 10.3" not in out and "// 10.4" not in out


def test_stall_figures_of_a_recorded_gpu():
    figures = Lab("reduction").stalls("15_vectorized", "H200")
    assert figures["kernel"] == "VectorizedSumReductionKernel"
    assert 0 < figures["dram__throughput.avg.pct_of_peak_sustained_elapsed"] <= 100
    assert Lab("reduction").stalls("15_vectorized", "T4") is None


def test_a_share_of_the_compute_roof_counts_flops(two_gpus):
    e = two_gpus.entry("15_vectorized", "H200")
    assert two_gpus.roof_share("15_vectorized", "H200", "fp32_gflops") == pytest.approx(e["gflops"] / 60000.0)


def test_a_tuned_row_is_not_the_variant_the_text_is_about(two_gpus, tmp_path):
    tuned = {**row("05_coarsened", 246.0), "config": {"BLOCK_DIM": 256, "COARSE_FACTOR": 16}}
    default = {**row("15_vectorized", 250.0), "config": {"BLOCK_DIM": 1024, "UNROLL": 4}}
    recording(tmp_path, "NVIDIA H200", "ccccccc", "2026-11-30T06:00:00+00:00",
              {"reduction": [tuned, default, row("cub::DeviceReduce", 250.5, "library")]}, 4336.0)
    lab = Lab("reduction", directory=tmp_path)
    assert lab.time("05_coarsened", "H200") == 338.4 and lab.time("15_vectorized", "H200") == 250.1
    assert [r["commit"] for r in lab.tuned_runs["H200"]] == ["ccccccc"]      # shown apart, as tuned
