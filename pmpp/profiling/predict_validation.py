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

from .. import results
from ..results import REPO_ROOT
from . import predict as model

REPORT = REPO_ROOT / "docs" / "predicted.md"
GPUS = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}
FIT_ON = "H100"
WITHIN = 1.5                        # "within a factor of 1.5"
GOALS = {"spearman": 0.9, "median_error": 0.25, "within": 0.80}


def recorded_rows(device: str) -> list[dict]:
    """(chapter, variant row) of the newest run of each chapter on ``device`` (its driver name)."""
    from .. import chapters
    rows = []
    for name in chapters.names():
        run = next((r for r in results.recorded(name) if r["device"]["name"] == device), None)
        if run is None:
            continue
        for entry in run["chapters"][name]:
            if entry["kind"] == "variant" and entry.get("correct") and not entry.get("skipped"):
                rows.append({"chapter": name, "row": entry, "commit": run["commit"]})
    return rows


def _variant(chapter, entry):
    variant = chapter.variant(entry["name"])
    config = entry.get("config")
    return variant.with_defines(**config) if config and config != variant.config() else variant


def loads(device: str, report=print) -> list[dict]:
    """Each recorded row of ``device`` with the :class:`~pmpp.profiling.predict.Load` the engine
    counts for it at the GPU size (None where the engine cannot run the variant)."""
    from .. import chapters
    spec = GPUS[device]
    found = []
    for item in recorded_rows(device):
        chapter = chapters.get(item["chapter"])
        try:
            variant = _variant(chapter, item["row"])
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
    "launch_us": (2.0, 3.0),
    "latency_ns": (300.0, 400.0, 600.0, 800.0),
    "instructions_per_block": (2.0, 3.0, 4.0, 6.0),
    "atomic_ns": (0.5, 1.0, 2.0, 4.0),
    "l2_bytes_per_clock": (32.0, 48.0, 64.0, 96.0),
    "barrier_ns": (100.0, 250.0, 500.0),
    "loads_in_flight": (1.0, 2.0, 4.0, 8.0),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {REPORT.relative_to(REPO_ROOT)}")
    args = parser.parse_args(argv)
    for device, gpu in GPUS.items():
        found = loads(device)
        rows = rows_for(found, gpu)
        print(gpu, summary(rows))
        for r in rows:
            print(f"  {r['chapter']:14s} {r['variant']:32s} {r['predicted_us']:10.1f} {r['recorded_us']:10.1f} "
                  f"{r['ratio']:6.2f} {r['bound']}")


if __name__ == "__main__":
    main()
