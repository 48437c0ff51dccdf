"""The time model (pmpp.profiling.predict): its arithmetic, any kernel, workbook variants, and the
report that holds it against two GPUs' recordings (docs/predicted.md)."""
import re

import numpy as np
import pytest

import pmpp
from pmpp import chapters
from pmpp.gpus import GPUS
from pmpp.profiling import predict as model
from pmpp.profiling import predict_cases, predict_validation

H100 = GPUS["H100"]
NOTHING = dict(launches=1, blocks=132 * 16, warps=132 * 64, requests=0, loads=0, load_sectors=0, sectors=0,
               dram_bytes=0, shared_wavefronts=0, shared_instructions=0, basic_blocks=0, atomic_max_updates=0,
               barriers=0)


def test_every_gpu_of_the_table_has_what_the_model_needs():
    for spec in GPUS.values():
        assert spec.clock_mhz > 500 and spec.dram_gbs > 100 and spec.l2_bytes >= 4 * 2 ** 20, spec.name


def test_a_launch_that_only_moves_bytes_takes_them_over_the_copy_bandwidth():
    load = model.Load(**{**NOTHING, "dram_bytes": 1e9, "loads": 1e6, "load_sectors": 16e6, "requests": 1e6,
                         "sectors": 16e6})
    p = model.predict_counts(load, "H100")
    dram_us = 1e9 / (H100.dram_gbs * 1e9 * model.DRAM_EFFICIENCY) * 1e6
    assert p.bound == "DRAM" and p.terms["DRAM"] == pytest.approx(dram_us)
    # the slowest resource, plus the share of the others it does not hide: the L1's 16 sectors and
    # the issue slot of each 512-byte request
    per_clock = H100.sm_count * H100.clock_mhz * 1e6
    assert p.terms["L1"] == pytest.approx(16e6 / (4 * per_clock) * 1e6)
    assert p.terms["issue"] == pytest.approx(1e6 / (4 * per_clock) * 1e6)
    # one wave of blocks, no barrier: a block waits one load's latency
    assert p.terms["barriers"] == pytest.approx(model.CONSTANTS["latency_ns"] / 1000)
    others_us = p.terms["L1"] + p.terms["issue"] + p.terms["barriers"]
    assert p.time_us == pytest.approx(dram_us + model.CONSTANTS["overlap"] * others_us + model.CONSTANTS["launch_us"])
    # the same bytes on the H200: its faster memory, the same constants
    assert model.predict_counts(load, "H200").terms["DRAM"] == pytest.approx(dram_us * 3352 / 4814)


def test_bank_conflicts_make_shared_memory_the_bound():
    load = model.Load(**{**NOTHING, "shared_wavefronts": 32 * 1e7, "shared_instructions": 1e7})
    p = model.predict_counts(load, "H100")
    assert p.bound == "shared memory"
    assert p.terms["shared memory"] == pytest.approx(32e7 / (H100.sm_count * H100.clock_mhz * 1e6) * 1e6)


def test_few_resident_warps_make_latency_the_bound():
    bytes_ = 1e9
    # 16 bytes per lane: 512 bytes on their way per warp, enough at full occupancy to keep DRAM busy
    full = model.Load(**{**NOTHING, "dram_bytes": bytes_, "loads": bytes_ / 512, "load_sectors": bytes_ / 32,
                         "requests": bytes_ / 512, "sectors": bytes_ / 32})
    assert model.predict_counts(full, "H100").bound == "DRAM"
    starved = model.predict_counts(full, "H100", occupancy=0.0625)     # 4 warps of 64 per SM
    assert starved.bound == "latency" and starved.time_us > model.predict_counts(full, "H100").time_us


def test_counts_scale_along_the_line_through_two_sizes():
    small = model.Load(**{**NOTHING, "dram_bytes": 110.0, "blocks": 10, "barriers": 7})
    big = model.Load(**{**NOTHING, "dram_bytes": 210.0, "blocks": 20, "barriers": 7})
    scaled = big.scaled(small, 2.0, 1.0, 10.0)
    assert scaled.dram_bytes == pytest.approx(1010.0)      # 10 + 100 per unit of size
    assert scaled.blocks == pytest.approx(100.0)
    assert scaled.barriers == 7                             # does not grow with the size: kept


def test_unknown_gpu_names_the_known_ones():
    with pytest.raises(ValueError, match="H200"):
        model.predict_counts(model.Load(**NOTHING), "V100")


def test_predict_takes_a_kernel_from_pmpp_load():
    with pytest.raises(TypeError, match="pmpp.load"):
        pmpp.predict(lambda: None, (1,), (32,), ())


# ---------------------------------------------------------------------------------------------
# Any kernel: the kernels outside the workbook, at a size the test affords

def _predicted(name, n, gpu="H100"):
    module = predict_cases.load("cpu")
    rng = np.random.default_rng(0)
    args = {"saxpy": lambda: (rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.float32(2),
                              np.uint32(n)),
            "strided_copy": lambda: (rng.random(2 * n, dtype=np.float32), np.zeros(n, np.float32), np.uint32(n)),
            }[name]()
    return pmpp.predict(module.get_function(name), ((n + 255) // 256,), (256,), args, gpu=gpu)


def test_predict_any_kernel_says_what_bounds_it():
    p = _predicted("saxpy", 1 << 20)
    assert p.time_us > 2 * model.CONSTANTS["launch_us"] and p.bound in model.RESOURCES
    assert "predicted" in str(p) and "H100" in str(p)


def test_uncoalesced_stores_cost_sectors_and_time():
    module = predict_cases.load("cpu")
    side = 2048
    a = np.random.default_rng(2).random(side * side, dtype=np.float32)

    def predicted(name, grid):
        return pmpp.predict(module.get_function(name), grid, (32, 8), (a, np.zeros_like(a), np.uint32(side)))
    naive = predicted("transpose_naive", (side // 32, side // 8))
    tiled = predicted("transpose_tiled", (side // 32, side // 32))
    assert naive.terms["L1"] > 4 * tiled.terms["L1"]          # 32 sectors a store against 4
    assert naive.time_us > tiled.time_us


def test_transpose_through_a_padded_tile_predicts_fewer_shared_wavefronts():
    module = predict_cases.load("cpu")
    side = 256
    a = np.random.default_rng(1).random(side * side, dtype=np.float32)

    def shared_us(name):
        return pmpp.predict(module.get_function(name), (side // 32, side // 32), (32, 8),
                            (a, np.zeros_like(a), np.uint32(side))).terms["shared memory"]
    assert shared_us("transpose_tiled_conflicts") > 5 * shared_us("transpose_tiled")


# ---------------------------------------------------------------------------------------------
# Workbook variants at their GPU size

def test_the_coarsened_reduction_is_predicted_faster_than_the_divergent_one():
    reduction = chapters.get("reduction")
    simple = model.predict_variant(reduction, "01_simple", "H100")
    coarsened = model.predict_variant(reduction, "05_coarsened", "H100")
    assert coarsened.time_us < simple.time_us
    assert "scaled to n=268435456" in coarsened.note


def test_every_chapter_shrinks_its_gpu_problem_keeping_its_parameters():
    for name in chapters.names():
        chapter = chapters.get(name)
        gpu = chapter.problems["gpu"]
        work = chapter.variants[0].model(gpu).bytes
        smaller = chapter.shrink(gpu, 64)
        assert set(smaller) == set(gpu), name
        ratio = work / chapter.variants[0].model(smaller).bytes
        assert 16 <= ratio <= 256, (name, ratio)


def test_run_on_the_cpu_engine_prints_the_predicted_gpu_time(capsys, monkeypatch):
    from pmpp.cli import main
    monkeypatch.delenv("PMPP_TARGET", raising=False)
    assert main(["run", "reduction", "--backend", "cpu", "--n", "5000", "--variants", "05"]) == 0
    out = capsys.readouterr().out
    assert "pred. H100 us" in out and "bound by" in out
    row = next(line for line in out.splitlines() if line.startswith("05_coarsened"))
    assert re.search(r"\d+\.\d\s+(DRAM|latency|L2|L1|shared memory|issue|atomics|barriers|launch)\s*$", row)
    assert main(["run", "reduction", "--backend", "cpu", "--n", "5000", "--variants", "05", "--predict", "T4"]) == 0
    assert "pred. T4 us" in capsys.readouterr().out
    assert main(["run", "reduction", "--backend", "cpu", "--n", "5000", "--variants", "05", "--predict", "none"]) == 0
    assert "pred." not in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The report

def _report_rows():
    text = predict_validation.REPORT.read_text()
    section = text.split("## Every variant", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    header = [c.strip("| ") for c in rows[0]]
    return [dict(zip(header, (c.strip("| ") for c in row))) for row in rows[1:]], text


def test_report_shows_every_recorded_variant_with_its_recorded_time():
    rows, _ = _report_rows()
    by_key = {(r["chapter"], r["variant"]): r for r in rows}
    for device, gpu in predict_validation.GPUS.items():
        recorded = predict_validation.recorded_rows(device)
        assert recorded
        for item in recorded:
            variant = chapters.get(item["chapter"]).variant(item["row"]["name"])
            if variant.gpu_only:
                continue
            row = by_key[(item["chapter"], variant.name)]
            assert float(row[f"{gpu} recorded us"].replace(",", "")) == pytest.approx(item["row"]["median_us"], rel=1e-3, abs=0.051)


def test_report_states_the_constants_the_model_uses():
    _, text = _report_rows()
    for name, value in model.CONSTANTS.items():
        assert f"| `{name}` | {value:g} |" in text


@pytest.mark.slow
def test_report_predictions_are_current_for_the_reduction_chapter():
    rows, _ = _report_rows()
    reported = {r["variant"]: r for r in rows if r["chapter"] == "reduction"}
    for device, gpu in predict_validation.GPUS.items():
        found = predict_validation.loads(device, only=("reduction",))
        for row in predict_validation.rows_for(found, gpu):
            value = float(reported[row["variant"]][f"{gpu} predicted us"].replace(",", ""))
            assert row["predicted_us"] == pytest.approx(value, rel=0.05), (gpu, row["variant"])


@pytest.mark.skipif(pmpp.gpu_available(), reason="the prediction stands in for a GPU's time where there is none")
def test_grade_shows_a_passing_submissions_predicted_time_beside_the_reference(tmp_path):
    from pmpp.course.grading import grade
    from pmpp.source import kernels_dir
    mine = tmp_path / "03_packed.cu"
    mine.write_text((kernels_dir() / "elementwise" / "03_packed.cu").read_text().replace("float4", "float4 "))
    predict = lambda chapter, variant, path, timeout: model.predict_variant(chapter, variant, "T4", path=path)
    report = grade("elementwise/03_packed", mine, seed=1, predict=predict)
    assert report.passed and report.predicted_gpu == "T4"
    assert report.predicted_us == pytest.approx(report.predicted_reference_us, rel=0.01)
    assert "predicted T4 time" in str(report) and "not graded" in str(report)
    assert grade("elementwise/03_packed", mine, seed=1).predicted_us is None      # not asked for


def test_a_notebook_shows_predicted_beside_recorded_bars_on_every_recorded_gpu():
    from pmpp.lab import Lab
    lab = Lab(chapters.get("reduction"))
    names = ["05_coarsened", "15_vectorized", "cub::DeviceReduce"]
    fig = lab.predicted_bars(names)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for gpu in lab.gpus:
        assert f"{gpu} recorded" in legend and f"{gpu} predicted" in legend
    # two variants predicted and recorded on each GPU, the library routine recorded only
    recorded = sum(lab.has(gpu, name) for gpu in lab.gpus for name in names)
    assert len(ax.patches) == recorded + 2 * len(lab.gpus)
    assert "predicted" in ax.get_xlabel() and ax.get_xscale() == "log"


def test_serial_counts_of_a_look_back_scan_are_the_same_on_every_run():
    # blocks one after another: each finds the one before it done, so its polls do not depend on
    # how the CPU's threads were scheduled (two counts, kept apart by the sampled warp)
    from pmpp.profiling.explain import count_variant
    scan = chapters.get("scan")
    problem = {**scan.problems["cpu"], "n": 1 << 18}
    first, second = (count_variant(scan, "08_decoupled_lookback", problem, serial=True, sample_warp=(0, w)).metrics()
                     for w in (0, 1))
    assert first == second
