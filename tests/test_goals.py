"""docs/goals.md: the goals against the libraries, from the committed recordings."""
from pathlib import Path

from pmpp import goals

ROOT = Path(__file__).resolve().parent.parent


def test_the_goals_report_is_current():
    assert (ROOT / goals.REPORT).read_text() == goals.report(goals.tables()), \
        "docs/goals.md is stale: python -m pmpp.goals"


def test_every_goal_is_measured_on_both_gpus_and_every_shortfall_says_why():
    every = goals.tables()
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= every.keys()
    for device, rows in every.items():
        assert {r["chapter"] for r in rows} == {"reduction", "scan", "histogram", "stencil", "implicit_gemm"}
        for r in rows:
            assert r["ratio"] > 0 and r["met"] == (r["ratio"] >= r["target"]) and device in r["run"]
            assert r["met"] or "Nsight Compute" in r["why"], r


def test_a_slower_best_variant_would_miss_its_goal():
    run = {"chapters": {"reduction": [
        {"name": "05_coarsened", "kind": "variant", "median_us": 400.0, "correct": True},
        {"name": "cub::DeviceReduce", "kind": "library", "median_us": 360.0, "correct": True},
        {"name": "06_wrong", "kind": "variant", "median_us": 100.0, "correct": False}]}}
    ratio, compared = goals._faster_than("reduction", "cub::DeviceReduce")(run)
    assert ratio == 360.0 / 400.0 and compared.startswith("05_coarsened")
