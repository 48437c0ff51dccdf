"""The workbook's goals against the libraries, read from the committed H100 recordings.

Each goal is a ratio of two rows of one recorded run (the same run: the same GPU, the same
inputs, the same timing) or of a row and that run's own measured ceiling. ``python -m pmpp.goals``
rewrites ``docs/goals.md`` from ``results/``; a test keeps it current. A goal that is not met
says why, from the Nsight Compute summaries under ``results/ncu/``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import results

REPORT = Path("docs") / "goals.md"
NCU_DIR = results.RESULTS_DIR / "ncu"


@dataclass(frozen=True)
class Goal:
    chapter: str
    what: str                       # the goal in words
    target: float                   # the ratio to reach
    measure: Callable[[Mapping[str, Any]], tuple[float, str]]   # run -> (ratio, the rows compared)
    why_short: Callable[[], str] | None = None                 # the measured reason, if short


def _rows(run, chapter):
    return {e["name"]: e for e in run["chapters"][chapter] if not e.get("skipped") and e.get("correct")}


def _best(rows, keep=lambda name: True):
    """The fastest correct variant row (``keep`` filters names)."""
    variants = [e for e in rows.values() if e["kind"] == "variant" and keep(e["name"])]
    return min(variants, key=lambda e: e["median_us"])


def _faster_than(chapter, library, keep=lambda name: True):
    def measure(run):
        rows = _rows(run, chapter)
        best, lib = _best(rows, keep), rows[library]
        return lib["median_us"] / best["median_us"], f"{best['name']} {best['median_us']:.1f} us, {library} {lib['median_us']:.1f} us"
    return measure


def _of_ceiling(chapter, ceiling, keep=lambda name: True):
    def measure(run):
        best = _best(_rows(run, chapter), keep)
        limit = run["ceilings"][ceiling]
        return best["gbps"] / limit, f"{best['name']} {best['gbps']:.0f} GB/s, {ceiling} {limit:.0f} GB/s"
    return measure


def _ncu(name):
    return json.loads((NCU_DIR / name).read_text())


def _scan_reason():
    data = _ncu("scan-lookback-h100-5a4a881.json")
    v = data["variants"]["12_bulk_copy_lookback"]
    return (f"Nsight Compute {data['ncu']} on 12_bulk_copy_lookback: DRAM throughput "
            f"{v['dram_throughput_pct']}% of peak; each warp spends {v['barrier_stall_cycles']} of "
            f"{v['warp_cycles_per_issued_instruction']} cycles between instructions stalled at a CTA barrier "
            f"({v['barrier_stall_pct']}%), at {v['theoretical_occupancy_pct']}% theoretical occupancy "
            f"(limited by {' and '.join(v['occupancy_limiters'])})")


def _simt(name):
    """An FP32 variant: not one of the tensor-core (TF32) ones."""
    from .chapters import implicit_gemm
    return implicit_gemm.CHAPTER.variant(name).problem.get("precision") != "tf32"


GOALS = (
    Goal("reduction", "best variant vs cub::DeviceReduce", 1.0, _faster_than("reduction", "cub::DeviceReduce")),
    Goal("reduction", "best variant vs the read-only ceiling", 0.95, _of_ceiling("reduction", "read_gbs")),
    Goal("scan", "best variant vs cub::DeviceScan", 1.0, _faster_than("scan", "cub::DeviceScan")),
    Goal("scan", "best variant vs the copy ceiling", 0.95, _of_ceiling("scan", "copy_gbs"), _scan_reason),
    Goal("histogram", "best variant vs cub::DeviceHistogram::HistogramEven (256 bins)", 1.1,
         _faster_than("histogram", "cub::DeviceHistogram::HistogramEven")),
    Goal("stencil", "08_temporal_blocking's effective bandwidth (4 sweeps' bytes over its time) vs copy", 1.8,
         _of_ceiling("stencil", "copy_gbs", lambda name: name == "08_temporal_blocking")),
    Goal("implicit_gemm", "best SIMT FP32 variant vs cuDNN FP32 (TF32 off)", 1.0,
         _faster_than("implicit_gemm", "cuDNN FP32 (torch conv2d)", _simt)),
    Goal("implicit_gemm", "a wgmma + TMA TF32 variant vs cuDNN TF32", 0.8,
         _faster_than("implicit_gemm", "cuDNN TF32 (torch conv2d)", lambda name: name == "10_wgmma_tma")),
)


def table() -> list[dict]:
    """One row per goal, from each chapter's newest recording."""
    rows = []
    for goal in GOALS:
        run = results.recorded(goal.chapter)[0]
        ratio, compared = goal.measure(run)
        met = ratio >= goal.target
        rows.append({"chapter": goal.chapter, "goal": goal.what, "target": goal.target, "ratio": ratio,
                     "met": met, "compared": compared, "run": results.label(run),
                     "why": "" if met or goal.why_short is None else goal.why_short()})
    return rows


def report(rows) -> str:
    lines = ["# Goals against the libraries, on the H100", "",
             "Written by `python -m pmpp.goals` from the newest recording of each chapter in `results/` "
             "(and, for a goal not met, the Nsight Compute summaries in `results/ncu/`).", "",
             "| chapter | goal | target | measured | met | rows compared | recording |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['chapter']} | {r['goal']} | {r['target']:.2f}x | {r['ratio']:.2f}x | "
                     f"{'yes' if r['met'] else 'no'} | {r['compared']} | {r['run']} |")
    short = [r for r in rows if not r["met"]]
    if short:
        lines += ["", "## Not met, and why", ""]
        lines += [f"* **{r['chapter']}, {r['goal']}** ({r['ratio']:.2f}x of {r['target']:.2f}x): {r['why']}."
                  for r in short]
    return "\n".join(lines) + "\n"


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    rows = table()
    (root / REPORT).write_text(report(rows))
    for r in rows:
        print(f"{r['chapter']:<14} {r['ratio']:.2f}x of {r['target']:.2f}x  {'met' if r['met'] else 'NOT met'}  {r['goal']}")


if __name__ == "__main__":
    main()
