"""docs/goals.md: the goals against the libraries, from the committed recordings."""
from pathlib import Path

from pmpp.profiling import goals

ROOT = Path(__file__).resolve().parent.parent


def test_the_goals_report_is_current():
    assert (ROOT / goals.REPORT).read_text() == goals.report(goals.tables()), \
        "docs/goals.md is stale: python -m pmpp.profiling.goals"


def test_every_goal_is_measured_on_both_gpus_and_every_shortfall_says_why():
    every = goals.tables()
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= every.keys()
    for device, rows in every.items():
        assert {r["chapter"] for r in rows} == {g.chapter for g in goals.GOALS} >= {
            "reduction", "scan", "histogram", "stencil", "implicit_gemm", "convolution", "pooling", "upsample"}
        for r in rows:
            assert r["ratio"] > 0 and device in r["run"]
            if r["held_from"] == device:
                assert r["met"] is None    # the GPU whose ratio is the goal: nothing to compare
            else:
                assert r["met"] == (r["ratio"] >= r["target"])
            # a shortfall is explained by Nsight Compute's figures, or says no recording has them
            assert r["met"] is not False or "cycles" in r["why"] or r["why"].startswith(goals.NOT_PROFILED), r


def test_a_held_goal_asks_for_the_reference_gpus_ratio():
    h200 = {r["goal"]: r for r in goals.table("NVIDIA H200")}
    h100 = {r["goal"]: r for r in goals.table(goals.REFERENCE_GPU)}
    held = [g for g in goals.GOALS if g.held_from]
    assert held
    for g in held:
        assert h200[g.what]["target"] == goals.HELD_WITHIN * h100[g.what]["ratio"]


def test_a_slower_best_variant_would_miss_its_goal():
    run = {"chapters": {"reduction": [
        {"name": "05_coarsened", "kind": "variant", "median_us": 400.0, "correct": True},
        {"name": "cub::DeviceReduce", "kind": "library", "median_us": 360.0, "correct": True},
        {"name": "06_wrong", "kind": "variant", "median_us": 100.0, "correct": False}]}}
    ratio, compared = goals._faster_than("reduction", "cub::DeviceReduce")(run)
    assert ratio == 360.0 / 400.0 and compared.startswith("05_coarsened")
