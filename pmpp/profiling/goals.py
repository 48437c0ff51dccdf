"""The workbook's goals against the libraries, read from the committed recordings of each GPU.

Each goal is a ratio of two rows of one recorded run (the same run: the same GPU, the same
inputs, the same timing) or of a row and that run's own measured ceiling. ``python -m pmpp.profiling.goals``
rewrites ``docs/goals.md`` from ``results/``; a test keeps it current. A goal that is not met
says why, from the Nsight Compute summaries under ``results/ncu/``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import results

REPORT = Path("docs") / "goals.md"
NCU_DIR = results.RESULTS_DIR / "ncu"


@dataclass(frozen=True)
class Goal:
    chapter: str
    what: str                       # the goal in words
    target: float                   # the ratio to reach (with ``held_from``: of that GPU's ratio)
    measure: Callable[[Mapping[str, Any]], tuple[float, str]]   # run -> (ratio, the rows compared)
    why_short: Callable[[Mapping[str, Any]], str] | None = None   # run -> the measured reason, if short
    held_from: str | None = None    # a GPU whose own ratio is the goal (times ``target``)


# A ratio "held" from another GPU may fall this much short: two medians of one run differ by
# about this much from run to run (METHOD.md), so a smaller drop is not a change.
HELD_WITHIN = 0.98
REFERENCE_GPU = "NVIDIA H100 80GB HBM3"


def _rows(run, chapter, problem=lambda p: True):
    """The correct rows of ``chapter`` by name, of the problems ``problem`` accepts."""
    return {e["name"]: e for e in run["chapters"][chapter]
            if not e.get("skipped") and e.get("correct") and problem(e.get("problem", ""))}


def _best(rows, keep=lambda name: True):
    """The fastest correct variant row (``keep`` filters names)."""
    variants = [e for e in rows.values() if e["kind"] == "variant" and keep(e["name"])]
    return min(variants, key=lambda e: e["median_us"])


def _named(row, chapter):
    """A variant row's name, with the configuration it was built with where ``pmpp tune`` chose it."""
    from ..chapters import get
    config = row.get("config")
    if not config or config == get(chapter.split(":")[0]).variant(row["name"]).config():
        return row["name"]
    return f"{row['name']} ({' '.join(f'{k}={v}' for k, v in config.items())})"


def _faster_than(chapter, library, keep=lambda name: True, problem=lambda p: True):
    def measure(run):
        rows = _rows(run, chapter, problem)
        best, lib = _best(rows, keep), rows[library]
        return (lib["median_us"] / best["median_us"],
                f"{_named(best, chapter)} {best['median_us']:.1f} us, {library} {lib['median_us']:.1f} us")
    return measure


def _of_ceiling(chapter, ceiling, keep=lambda name: True):
    def measure(run):
        best = _best(_rows(run, chapter), keep)
        limit = run["ceilings"][ceiling]
        return best["gbps"] / limit, f"{_named(best, chapter)} {best['gbps']:.0f} GB/s, {ceiling} {limit:.0f} GB/s"
    return measure


def _ncu(name):
    return json.loads((NCU_DIR / name).read_text())


def _stalls(chapter, keep=lambda name: True, problem=lambda p: True):
    """Why the run's best variant (of those ``keep`` accepts) falls short on the recording's GPU,
    from the newest ``pmpp profile --stalls`` recording of that GPU that has it (results/stalls/),
    else from the H100 summaries copied from Nsight Compute's reports (results/ncu/)."""
    def why(run):
        from .ncu import recorded_stalls
        best = _best(_rows(run, chapter, problem), keep)
        name = best["name"]
        for data in recorded_stalls(chapter):
            rows = {r["name"]: r for r in data["chapters"][chapter]["rows"]}
            if data["device"]["name"] == run["device"]["name"] and name in rows:
                said = stall_summary(rows[name], data["versions"].get("ncu"))
                if rows[name].get("config", {}) != best.get("config", {}) and _named(best, chapter) != name:
                    said += f" (profiled as the workbook defines {name}, not as tuned)"
                return said
        if (chapter, name) == ("scan", "12_bulk_copy_lookback") and "H100" in run["device"]["name"]:
            return _scan_reason()
        return f"{NOT_PROFILED} {name} on the {run['device']['name']}"
    return why


NOT_PROFILED = "no Nsight Compute recording of"


def stall_summary(row: Mapping[str, Any], ncu_version: str | None = None) -> str:
    """Nsight Compute's figures for the longest kernel of a stall recording's row, in words."""
    kernel = max(row["kernels"], key=lambda k: k["metrics"].get("gpu__time_duration.sum", 0))
    m = kernel["metrics"]
    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    stalls = sorted(((v, k[len(prefix):-len(suffix)].replace("_", " ")) for k, v in m.items()
                     if k.startswith(prefix)), reverse=True)
    cycles = m.get("smsp__average_warp_latency_per_inst_issued.ratio")
    top = ", ".join(f"{reason} {value:.1f}" for value, reason in stalls[:2])
    version = (ncu_version or "").split(" (")[0].replace("Version ", "")
    figures = [("DRAM throughput {:.1f}% of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
               ("issue slots busy {:.1f}%", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
               ("achieved occupancy {:.1f}%", "sm__warps_active.avg.pct_of_peak_sustained_active"),
               ("theoretical occupancy {:.0f}%", "sm__maximum_warps_per_active_cycle_pct"),
               ("{:.0f} registers a thread", "launch__registers_per_thread")]
    said = ", ".join(text.format(m[name]) for text, name in figures if name in m)
    return (f"Nsight Compute{' ' + version if version else ''} on {row['name']} "
            f"({kernel['kernel'].split('(')[0].replace('void ', '')}): {said}; a warp issues every "
            f"{cycles:.1f} cycles, stalled most on {top} cycles")


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
    from ..chapters import implicit_gemm
    return implicit_gemm.CHAPTER.variant(name).problem.get("precision") != "tf32"


def _not(name):
    return lambda n: n != name


def _only(name):
    return lambda n: n == name


def _problem_has(text, present=True):
    return lambda problem: (text in problem) == present


GOALS = (
    Goal("reduction", "best variant vs cub::DeviceReduce", 1.02, _faster_than("reduction", "cub::DeviceReduce"),
         _stalls("reduction")),
    Goal("reduction", "best variant vs the read-only ceiling", 0.98, _of_ceiling("reduction", "read_gbs"),
         _stalls("reduction")),
    Goal("scan", "best variant vs cub::DeviceScan", 1.15, _faster_than("scan", "cub::DeviceScan"),
         _stalls("scan")),
    Goal("scan", "best variant vs the copy ceiling", 0.95, _of_ceiling("scan", "copy_gbs"), _stalls("scan")),
    Goal("histogram", "best variant vs cub::DeviceHistogram::HistogramEven (256 bins)", 1.8,
         _faster_than("histogram", "cub::DeviceHistogram::HistogramEven"), _stalls("histogram")),
    Goal("stencil", "08_temporal_blocking's effective bandwidth (4 sweeps' bytes over its time) vs copy", 1.8,
         _of_ceiling("stencil", "copy_gbs", _only("08_temporal_blocking")),
         _stalls("stencil", _only("08_temporal_blocking"))),
    Goal("implicit_gemm", "best SIMT FP32 variant vs cuDNN FP32 (TF32 off)", 1.05,
         _faster_than("implicit_gemm", "cuDNN FP32 (torch conv2d)", _simt), _stalls("implicit_gemm", _simt)),
    Goal("implicit_gemm", "a wgmma + TMA TF32 variant vs cuDNN TF32", 0.95,
         _faster_than("implicit_gemm", "cuDNN TF32 (torch conv2d)", _only("10_wgmma_tma")),
         _stalls("implicit_gemm", _only("10_wgmma_tma"))),
    Goal("convolution", "best general 5x5 variant vs cupyx correlate (8192², not the separable filter)", 6.0,
         _faster_than("convolution", "cupyx.scipy.ndimage.correlate", problem=_problem_has("separable", False)),
         _stalls("convolution", problem=_problem_has("separable", False))),
    Goal("pooling", "best variant vs torch.max_pool3d", HELD_WITHIN,
         _faster_than("pooling", "torch.max_pool3d"), _stalls("pooling"), held_from=REFERENCE_GPU),
    Goal("elementwise", "best z = x * y (float32) vs torch", HELD_WITHIN,
         _faster_than("elementwise", "torch", problem=_problem_has("x * y")),
         _stalls("elementwise", problem=_problem_has("x * y")), held_from=REFERENCE_GPU),
    Goal("elementwise:float32_silu_mul", "best z = silu(x) * y (float32) vs torch", HELD_WITHIN,
         _faster_than("elementwise:float32_silu_mul", "torch"), _stalls("elementwise:float32_silu_mul"),
         held_from=REFERENCE_GPU),
    Goal("upsample", "best x2 forward vs torch (nearest)", HELD_WITHIN,
         _faster_than("upsample", "torch", problem=_problem_has("forward")),
         _stalls("upsample", problem=_problem_has("forward")), held_from=REFERENCE_GPU),
)


def devices() -> list[str]:
    """The GPUs with a recording of every chapter a goal names, in the order first recorded."""
    chapters = {goal.chapter for goal in GOALS}
    runs = sorted(results.recorded(), key=lambda r: r["date"])
    names = dict.fromkeys(r["device"]["name"] for r in runs)
    return [d for d in names if all(any(r["device"]["name"] == d and r["chapters"].get(c) for r in runs)
                                    for c in chapters)]


def table(device: str | None = None) -> list[dict]:
    """One row per goal, from each chapter's newest recording on ``device`` (default: the newest GPU)."""
    device = device or devices()[-1]
    rows = []
    for goal in GOALS:
        run = _newest(goal.chapter, device)
        ratio, compared = goal.measure(run)
        target, reference = goal.target, device == goal.held_from
        if goal.held_from and not reference:
            target *= goal.measure(_newest(goal.chapter, goal.held_from))[0]
        met = None if reference else ratio >= target
        rows.append({"chapter": goal.chapter, "goal": goal.what, "target": target, "ratio": ratio,
                     "met": met, "held_from": goal.held_from, "compared": compared, "run": results.label(run),
                     "device": device, "why": "" if met is not False or goal.why_short is None else goal.why_short(run)})
    return rows


def _newest(chapter, device):
    return next(r for r in results.recorded(chapter) if r["device"]["name"] == device)


def report(tables: Mapping[str, list[dict]]) -> str:
    """docs/goals.md: a table per GPU (``tables``: device -> :func:`table`)."""
    lines = ["# Goals against the libraries, on each recorded GPU", "",
             "Written by `python -m pmpp.profiling.goals` from the newest recording of each chapter on each GPU in `results/` "
             "(and, for a goal not met, Nsight Compute's figures: `pmpp profile --stalls` recordings in "
             "`results/stalls/`, and the H100 summaries in `results/ncu/`). Each ratio compares two rows of one "
             "run, or a row and that run's own measured ceiling. A goal \"held\" from the "
             f"{REFERENCE_GPU.removeprefix('NVIDIA ')} asks another GPU for at least {HELD_WITHIN:.0%} of the ratio "
             f"the {REFERENCE_GPU.removeprefix('NVIDIA ')} recorded ({HELD_WITHIN:.0%}: two medians of one run move "
             "about that much from run to run)."]
    for device, rows in tables.items():
        lines += ["", f"## {device}", "",
                  "| chapter | goal | target | measured | met | rows compared | recording |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['chapter']} | {r['goal']} | {_target(r)} | {_ratio(r)} | "
                         f"{_met(r)} | {r['compared']} | {r['run']} |")
        short = [r for r in rows if r["met"] is False]
        if short:
            lines += ["", f"Not met on the {device}, and why:", ""]
            lines += [f"* **{r['chapter']}, {r['goal']}** ({_ratio(r)} of {_target(r)}): {r['why']}."
                      for r in short]
    return "\n".join(lines) + "\n"


def _target(row):
    if not row["held_from"]:
        return f"{row['target']:.2f}x"
    if row["met"] is None:
        return "the ratio to hold"
    return f"{row['target']:.2f}x ({HELD_WITHIN:.0%} of the {row['held_from'].removeprefix('NVIDIA ')}'s)"


def _ratio(row):
    """Two decimals, three where two would print the target itself (1.018x of 1.02x)."""
    close = f"{row['ratio']:.2f}" == f"{row['target']:.2f}"
    return f"{row['ratio']:.3f}x" if close else f"{row['ratio']:.2f}x"


def _met(row):
    return {True: "yes", False: "no", None: "reference"}[row["met"]]


def tables() -> dict[str, list[dict]]:
    return {device: table(device) for device in devices()}


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    every = tables()
    (root / REPORT).write_text(report(every))
    for device, rows in every.items():
        for r in rows:
            print(f"{device:<22} {r['chapter']:<14} {_ratio(r)} of {_target(r)}  "
                  f"{ {True: 'met', False: 'NOT met', None: 'reference'}[r['met']]}  {r['goal']}")


if __name__ == "__main__":
    main()
