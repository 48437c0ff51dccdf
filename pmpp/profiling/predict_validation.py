"""The time model against two GPUs' recordings: every variant, predicted and recorded.

    python -m pmpp.profiling.predict_validation            # prints the report
    python -m pmpp.profiling.predict_validation --write    # and writes docs/predicted.md

For each GPU with recordings in ``results/`` (the newest run of each chapter), each variant row
that ran correctly and that the CPU engine can run: the variant built as the row says (its tuned
configuration), counted at two small sizes, scaled to the chapter's GPU size, predicted with
:func:`pmpp.profiling.predict.predict_variant` for that GPU. The model's constants were fitted on
the H100's rows (:func:`fit`); the H200's rows test them unchanged.
"""
from __future__ import annotations

import argparse
import itertools
import math
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import results, tuning
from ..results import REPO_ROOT
from . import predict as model

REPORT = REPO_ROOT / "docs" / "predicted.md"
GPUS = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}
FIT_ON = "H100"
WITHIN = 1.5                        # "within a factor of 1.5"
GOALS = {"spearman": 0.9, "median_error": 0.25, "within": 0.80}


def recorded_rows(device: str, only: Sequence[str] | None = None) -> list[dict]:
    """(chapter, variant row) of the newest run of each chapter (or of those ``only`` names) on
    ``device`` (its driver name)."""
    from .. import chapters
    rows = []
    for name in only or chapters.names():
        run = next((r for r in results.recorded(name) if r["device"]["name"] == device), None)
        if run is None:
            continue
        for entry in run["chapters"][name]:
            if entry["kind"] == "variant" and entry.get("correct") and not entry.get("skipped"):
                rows.append({"chapter": name, "row": entry, "commit": run["commit"]})
    return rows


def loads(device: str, report=print, only: Sequence[str] | None = None) -> list[dict]:
    """Each recorded row of ``device`` (of the chapters ``only`` names, or all) with the
    :class:`~pmpp.profiling.predict.Load` the engine counts for it at the GPU size (None where the
    engine cannot run the variant)."""
    from .. import chapters
    spec = GPUS[device]
    found = []
    for item in recorded_rows(device, only):
        chapter = chapters.get(item["chapter"])
        try:
            variant = tuning.as_recorded(chapter, item["row"])
        except KeyError:             # a variant since renamed or removed
            continue
        if variant.gpu_only:
            continue
        try:
            load, occ = model.variant_load(chapter, variant, spec)
        except Exception as exc:     # the engine refuses it (a race it reports, a missing feature)
            report(f"  {item['chapter']}/{variant.name}: not predicted: {str(exc).splitlines()[0][:120]}")
            continue
        found.append({**item, "variant": variant.name, "load": load, "occupancy": occ})
    return found


def rows_for(found: Sequence[dict], gpu: str, constants: Mapping[str, float] | None = None) -> list[dict]:
    rows = []
    for item in found:
        p = model.predict_counts(item["load"], gpu, occupancy=item["occupancy"], constants=constants)
        recorded = item["row"]["median_us"]
        rows.append({"chapter": item["chapter"], "variant": item["variant"], "predicted_us": p.time_us,
                     "recorded_us": recorded, "ratio": p.time_us / recorded, "bound": p.bound})
    return rows


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    from scipy.stats import spearmanr
    return float(spearmanr(xs, ys).statistic) if len(xs) > 2 else float("nan")


def summary(rows: Sequence[Mapping[str, Any]]) -> dict:
    errors = [abs(r["ratio"] - 1) for r in rows]
    within = sum(1 / WITHIN <= r["ratio"] <= WITHIN for r in rows)
    per_chapter = {}
    for chapter, group in itertools.groupby(sorted(rows, key=lambda r: r["chapter"]), key=lambda r: r["chapter"]):
        group = list(group)
        per_chapter[chapter] = spearman([r["predicted_us"] for r in group], [r["recorded_us"] for r in group])
    return {"variants": len(rows), "median_error": statistics.median(errors) if errors else float("nan"),
            "within": within / len(rows) if rows else float("nan"), "spearman": per_chapter}


def score(rows) -> float:
    """What the fit minimises: the mean squared log ratio, each capped at a factor of 2 so that
    the few variants the model cannot see (a retry loop, a spin-wait) do not set the constants."""
    cap = math.log(2) ** 2
    return sum(min(math.log(r["ratio"]) ** 2, cap) for r in rows) / len(rows)


def fit(found: Sequence[dict], gpu: str = FIT_ON, grid: Mapping[str, Sequence[float]] | None = None) -> dict:
    """The constants (a grid search over ``grid``) that predict ``gpu``'s rows best."""
    grid = grid or FIT_GRID
    names = list(grid)
    best = None
    for values in itertools.product(*(grid[n] for n in names)):
        constants = dict(zip(names, values))
        s = score(rows_for(found, gpu, constants))
        if best is None or s < best[0]:
            best = (s, constants)
    return best[1]


FIT_GRID = {
    "latency_ns": (300.0, 400.0, 500.0, 600.0, 800.0),
    "instructions_per_block": (0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
    "atomic_ns": (0.5, 1.0, 2.0, 4.0),
    "barrier_ns": (25.0, 50.0, 100.0, 250.0, 500.0),
    "overlap": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0),
}


# ---------------------------------------------------------------------------------------------
# Kernels outside the workbook

def case_rows(recording: Mapping[str, Any] | None = None, gpu: str | None = None) -> list[dict]:
    """Each kernel of :mod:`predict_cases`: predicted (the whole launch counted) and recorded."""
    import numpy as np
    from . import predict_cases
    recording = recording or next(iter(predict_cases.recorded()), None)
    if recording is None:
        return []
    gpu = gpu or GPUS[recording["device"]["name"]]
    measured = {r["name"]: r for r in recording["cases"]}
    module = predict_cases.load("cpu")
    rows = []
    for case in predict_cases.CASES:
        if case.name not in measured:
            continue
        args = case.arguments(np, np.random.default_rng(predict_cases.SEED))
        p = model.predict(module.get_function(case.kernel), case.grid, case.block, args, gpu=gpu)
        recorded = measured[case.name]["median_us"]
        rows.append({"chapter": "outside the workbook", "variant": case.name, "what": case.what,
                     "predicted_us": p.time_us, "recorded_us": recorded, "ratio": p.time_us / recorded,
                     "bound": p.bound})
    return rows


# ---------------------------------------------------------------------------------------------
# The bounding resource against Nsight Compute's busiest unit

NCU_UNITS = {"DRAM": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
             "L2": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
             "L1": "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
             "SM": "sm__throughput.avg.pct_of_peak_sustained_elapsed"}
# the model's resources as the unit Nsight Compute would see busiest (latency: any memory unit)
AS_NCU_UNIT = {"DRAM": "DRAM", "latency": "DRAM", "L1": "L1", "shared memory": "L1",
               "issue": "SM", "barriers": "SM", "atomics": "L2", "launch": "SM"}


NEAR = 5.0          # percentage points: units this close to the busiest count as busiest too


def ncu_units(device: str) -> dict[tuple[str, str], dict[str, float]]:
    """(chapter, variant) -> each unit's speed-of-light throughput (% of peak) in the newest stall
    recording of ``device`` that has all four (the variant's launch that ran longest)."""
    from .ncu import recorded_stalls
    from .. import chapters
    found = {}
    for chapter in chapters.names():
        for recording in reversed(recorded_stalls(chapter)):     # oldest first: newer ones replace
            if recording["device"]["name"] != device:
                continue
            for row in recording["chapters"][chapter]["rows"]:
                longest = max(row["kernels"], key=lambda k: k["metrics"].get("gpu__time_duration.sum", 0))
                m = longest["metrics"]
                if all(metric in m for metric in NCU_UNITS.values()):
                    found[(chapter, row["name"])] = {unit: m[metric] for unit, metric in NCU_UNITS.items()}
    return found


def bound_agreement(rows: Sequence[Mapping[str, Any]], units: Mapping[tuple[str, str], Mapping[str, float]]) -> list[dict]:
    """Each row with a recording: the busiest unit, whether the model's bound is that unit (or one
    within :data:`NEAR` points of it), and whether it is on the same side of Nsight Compute's
    speed-of-light section: memory (the largest of DRAM, L2, L1) or compute (SM)."""
    found = []
    for r in rows:
        pct = units.get((r["chapter"], r["variant"]))
        if pct is None:
            continue
        top = max(pct, key=pct.get)
        mine = AS_NCU_UNIT[r["bound"]]
        memory = max(pct["DRAM"], pct["L2"], pct["L1"]) >= pct["SM"]
        # a launch bound by latency saturates nothing: it agrees with whichever memory unit is busiest
        agrees = top != "SM" if r["bound"] == "latency" else pct[mine] >= pct[top] - NEAR
        found.append({**r, "ncu_unit": top, "agrees": agrees,
                      "same_side": (mine != "SM") == memory})
    return found


# ---------------------------------------------------------------------------------------------
# The report

# Why the model misses where it misses most (the report lists those it gets most wrong).
WHY = {
    "scan/07_stream_based": "each block waits for the one before it (a flag in global memory): the GPU runs "
                            "the blocks as a chain, the engine counts the work and not the wait",
    "histogram/13_dot_half_atomic": "a half-precision atomicAdd to one address retries on the GPU when "
                                    "other warps got there first; the engine's lanes never collide",
    "histogram/01_basic": "every thread's atomicAdd on a few bins: the model serialises the updates of one "
                          "address at a fixed rate; the L2's real rate depends on how they arrive",
    "histogram/04_private_shared": "shared-memory atomics on a block's private bins, then one global atomic per "
                                   "bin and block: the model times the merges as if they contended like 01's",
    "stencil/02_shared_memory_tiling": "a quarter of the threads only load the halo and then wait: the model sees "
                                       "few instructions, not the idle lanes' share of the issue slots",
    "scan/12_bulk_copy_lookback": "tensor-memory-accelerator copies and barriers: the engine counts the bytes, "
                                  "not the copy engine's latency between the stages",
    "reduction/01_simple": "each step reads and writes global memory between barriers: the model charges a "
                           "load's latency a step, the GPU's round trip through L2 differs",
    "reduction/02_convergent": "as 01: each step reads and writes global memory between barriers",
    "reduction/05_coarsened": "each thread adds up its elements in a loop that nvcc unrolls, so a warp has "
                              "several loads on their way; the model allows one",
    "reduction/13_reduce6": "as 05: several loads of a thread on their way at once, one in the model",
    "reduction/14_warp_shuffle": "as 05: several loads of a thread on their way at once, one in the model",
    "implicit_gemm/01_naive": "a thread's loop computes four indices with integer division and modulo for "
                              "each product: many SASS instructions per basic block, the model's average "
                              "is one",
    "reduction/06_reduce0": "each step tests tid % (2 * s): an integer modulo is a long run of SASS "
                            "instructions in one basic block, the model's average is one",
    "histogram/14_dot_fast_atomic_add": "every thread adds to the one output: the L2 serves updates of a single "
                                        "address more slowly than the fitted rate, which the histograms' bins set "
                                        "(dot_atomic_each, outside the workbook, misses the same way)",
    "histogram/15_dot_float_atomic": "as 14: every thread's atomic on one address",
    "histogram/12_register_counts": "the counts live in registers, selected by the byte's value: long basic "
                                    "blocks of compares that the model's average instructions per block misses",
    "histogram/05_contiguous": "each thread reads its own run of bytes: a warp's load touches 32 sectors, "
                               "which L1 holds for the next 31 loads; the model sends every sector to L2",
    "implicit_gemm/09_register_blocking": "FMAs from registers: the engine's basic blocks stand for far more "
                                          "SASS instructions than the model's average of a few",
}


def _fitted_cell(name: str, fitted: Mapping[str, float] | None) -> str:
    if name not in FIT_GRID:
        return "measured: the empty launch of the kernels outside the workbook"
    return f"{fitted[name]:g} (of {', '.join(f'{v:g}' for v in FIT_GRID[name])})" if fitted else "not refitted"


def _fmt_us(x: float) -> str:
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def _goal_line(gpu: str, s: Mapping[str, Any]) -> str:
    chapters_met = sum(v >= GOALS["spearman"] for v in s["spearman"].values())
    return (f"| {gpu} | {s['variants']} | {s['median_error']:.0%} (goal <= {GOALS['median_error']:.0%}) | "
            f"{s['within']:.0%} (goal >= {GOALS['within']:.0%}) | {chapters_met} of {len(s['spearman'])} |")


def report(tables: Mapping[str, Sequence[Mapping[str, Any]]], cases: Sequence[Mapping[str, Any]],
           agreement: Mapping[str, Sequence[Mapping[str, Any]]], fitted: Mapping[str, float] | None,
           case_gpu: str | None) -> str:
    gpus = list(tables)
    summaries = {g: summary(rows) for g, rows in tables.items()}
    lines = [
        "# Predicted against recorded: the time model on two GPUs",
        "",
        "Generated by `python -m pmpp.profiling.predict_validation --write`; a test keeps it current. Each "
        "variant is counted on the CPU engine at two small sizes, its counts scaled to the chapter's GPU "
        "size and turned into a time by `pmpp.profiling.predict` (the model: `pmpp/backends/cpu/README.md`, "
        "\"The time model\"); recorded: the newest `pmpp bench` run of the chapter on that GPU in `results/`, "
        "the variant built as that run built it. Constants fitted on the H100's rows only; the H200's rows "
        "test them unchanged.",
        "",
        "## Goals",
        "",
        "| GPU | variants | median \\|predicted / recorded - 1\\| | within a factor of 1.5 | chapters with Spearman >= 0.9 |",
        "|---|---|---|---|---|",
        *(_goal_line(g, summaries[g]) for g in gpus),
        "",
        "Spearman rank correlation of predicted and recorded times over each chapter's variants:",
        "",
        "| chapter | " + " | ".join(gpus) + " |",
        "|---|" + "---|" * len(gpus),
        *(f"| {c} | " + " | ".join(f"{summaries[g]['spearman'].get(c, float('nan')):.2f}" for g in gpus) + " |"
          for c in sorted({c for g in gpus for c in summaries[g]["spearman"]})),
        "",
        "## The constants",
        "",
        "| constant | value | the grid search on the H100's rows chose |",
        "|---|---|---|",
        *(f"| `{k}` | {v:g} | {_fitted_cell(k, fitted)} |" for k, v in model.CONSTANTS.items()),
        "",
    ]
    if any(agreement.values()):
        lines += ["## The bounding resource against Nsight Compute", "",
                  "The model's bound, as the unit Nsight Compute would see busiest (DRAM: DRAM; latency: any "
                  "memory unit; shared memory: L1; issue and barriers: SM; atomics: L2), against the unit with the highest "
                  "speed-of-light throughput in the newest stall recording (`results/stalls/`; on the H200 DRAM and "
                  "L2 run within a few points of each other in a streaming kernel, so a unit within 5 points of "
                  "the busiest counts), and the speed-of-light section's coarser split, memory or compute:", "",
                  "| GPU | variants recorded | the bound is the busiest unit (within 5 points) | memory against compute (SM) agrees |",
                  "|---|---|---|---|"]
        lines += [f"| {g} | {len(rows)} | {sum(r['agrees'] for r in rows)} ({sum(r['agrees'] for r in rows) / len(rows):.0%}) | "
                  f"{sum(r['same_side'] for r in rows)} ({sum(r['same_side'] for r in rows) / len(rows):.0%}) |"
                  for g, rows in agreement.items() if rows]
        lines += [""]
    worst = sorted((r for g in gpus for r in tables[g]), key=lambda r: -abs(math.log(r["ratio"])))
    seen, rows_worst = set(), []
    for r in worst:
        key = f"{r['chapter']}/{r['variant']}"
        if key not in seen:
            seen.add(key)
            rows_worst.append(r)
        if len(rows_worst) == 8:
            break
    lines += ["## Where it is most wrong", "", "| variant | predicted / recorded | why |", "|---|---|---|"]
    lines += [f"| {r['chapter']}/{r['variant']} | " + ", ".join(
                  f"{g} {t['ratio']:.2f}" for g in gpus for t in tables[g]
                  if (t['chapter'], t['variant']) == (r['chapter'], r['variant']))
              + f" | {WHY.get(r['chapter'] + '/' + r['variant'], 'not yet understood')} |" for r in rows_worst]
    lines += ["", "## Every variant", "",
              "| chapter | variant | " + " | ".join(f"{g} predicted us | {g} recorded us | {g} ratio | {g} bound"
                                                   for g in gpus) + " |",
              "|---|---|" + "---|---|---|---|" * len(gpus)]
    keyed = {g: {(r["chapter"], r["variant"]): r for r in tables[g]} for g in gpus}
    for key in sorted({k for g in gpus for k in keyed[g]}, key=lambda k: (k[0], k[1])):
        cells = []
        for g in gpus:
            r = keyed[g].get(key)
            cells += ([_fmt_us(r["predicted_us"]), _fmt_us(r["recorded_us"]), f"{r['ratio']:.2f}", r["bound"]]
                      if r else ["-", "-", "-", "-"])
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    if cases:
        s = summary(cases)
        lines += ["", f"## Kernels outside the workbook ({case_gpu})", "",
                  "Launches the model was not fitted to (`pmpp/profiling/predict_cases.cu`), each counted whole on the "
                  f"CPU engine and timed on the {case_gpu} (`results/predict/`): median error {s['median_error']:.0%}, "
                  f"{s['within']:.0%} within a factor of 1.5.", "",
                  "| kernel | what | predicted us | recorded us | ratio | bound |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['variant']} | {r['what']} | {_fmt_us(r['predicted_us'])} | {_fmt_us(r['recorded_us'])} | "
                  f"{r['ratio']:.2f} | {r['bound']} |" for r in cases]
    return "\n".join(lines) + "\n"


def build(report_progress=print) -> str:
    """Count, predict and compare everything; the report's text."""
    found = {gpu: loads(device, report_progress) for device, gpu in GPUS.items()}
    tables = {gpu: rows_for(rows, gpu) for gpu, rows in found.items()}
    fitted = fit(found[FIT_ON], FIT_ON)
    if fitted != {k: model.CONSTANTS[k] for k in fitted}:
        report_progress(f"note: the fit on the {FIT_ON} now gives {fitted}; pmpp.profiling.predict.CONSTANTS "
                        "has other values")
    from . import predict_cases
    recording = next(iter(predict_cases.recorded()), None)
    cases = case_rows(recording) if recording else []
    agreement = {gpu: bound_agreement(tables[gpu], ncu_units(device)) for device, gpu in GPUS.items()}
    return report(tables, cases, agreement, fitted, GPUS[recording["device"]["name"]] if recording else None)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {REPORT.relative_to(REPO_ROOT)}")
    args = parser.parse_args(argv)
    text = build()
    print(text)
    if args.write:
        REPORT.write_text(text)
        print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()
