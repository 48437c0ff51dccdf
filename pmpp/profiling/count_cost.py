"""What counting costs: ``python -m pmpp.profiling.count_cost [--repeats N] [--chapter NAME ...] [--out PATH]``.

Every variant of every chapter that the CPU engine runs (racy teaching examples left out), at the
size the notebooks run it there (the chapter's ``cpu`` problem), is run the way a notebook runs it
(``variant.launch``: all its launches, the arrays moved to the worker and back) from two builds of
its file in the same worker, so on the same OS threads: the plain build, uncounted, and the count
build (:func:`pmpp.counters.counting_module`), which also collects the counters of every launch and
turns them into :class:`pmpp.Counters`. The cost of counting is the ratio of the two times.

A third run, the count build not collecting (its hooks return at once), says how much of that cost
is the compiler's instrumentation alone (a call at every basic block and every load and store, and
-O1), which no work of the runtime's can take away: the "instrumented" ratio.

Each build runs once untimed first (the worker loads the module; the count build's code addresses
are looked up in its line table), and that first run's time is kept apart. Then the three runs take
turns, ``repeats`` each, so that a load that comes and goes on a shared machine falls on all; a
variant's time is its best run. The table goes to the terminal and, with the machine, compiler,
commit and per-chapter summaries (median, worst and total ratio), to
``results/count-cost/<cpu>-<n>cpu.json`` (beside the benchmark recordings, which results/*.json are).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

GOAL = 3.0  # counting may cost at most this many uncounted runs


def machine() -> dict:
    """The CPU, how many OS threads the engine runs blocks on, and the compiler of both builds."""
    from ..backends.cpu.client import default_threads
    from ..backends.cpu.toolchain import compiler
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cpu": model, "cpu_count": os.cpu_count(), "engine_threads": default_threads(),
            "compiler": compiler()[1], "python": platform.python_version()}


def default_path(info: dict) -> Path:
    from ..results import RESULTS_DIR, device_slug
    return RESULTS_DIR / "count-cost" / f"{device_slug(info['cpu'])}-{info['cpu_count']}cpu.json"


def _timed_run(module, variant, problem, inputs) -> float:
    module.launches.clear()
    start = time.perf_counter()
    variant.launch(module, problem, inputs)
    return time.perf_counter() - start


def time_variant(chapter, variant, repeats: int) -> dict:
    """Seconds of one run of ``variant`` from the plain build, from the count build, and from the
    count build not collecting (see the top)."""
    from .. import runner
    from ..counters import counting_module
    problem = runner.problem_for(variant, chapter.problems["cpu"])
    inputs = chapter.make_inputs(problem, np, np.random.default_rng(0))
    plain = runner.load_variant(chapter, variant, backend="cpu")
    counting = counting_module(plain)
    instrumented = counting_module(plain, collect=False)
    plain = plain.view(sm_count=counting.device_sm_count)    # the same grids, so the same launches
    first = {"plain": _timed_run(plain, variant, problem, inputs),
             "counted": _timed_run(counting, variant, problem, inputs)}
    launches = len(counting.launches)
    runs = {"plain": [], "counted": [], "instrumented": []}
    for _ in range(repeats):
        runs["plain"].append(_timed_run(plain, variant, problem, inputs))
        runs["counted"].append(_timed_run(counting, variant, problem, inputs))
        runs["instrumented"].append(_timed_run(instrumented, variant, problem, inputs))
    best = {k: min(v) for k, v in runs.items()}
    return {"chapter": chapter.name, "variant": variant.name, "launches": launches,
            "plain_s": best["plain"], "counted_s": best["counted"], "ratio": best["counted"] / best["plain"],
            "instrumented_s": best["instrumented"], "instrumented_ratio": best["instrumented"] / best["plain"],
            "plain_median_s": statistics.median(runs["plain"]),
            "counted_median_s": statistics.median(runs["counted"]),
            "first_plain_s": first["plain"], "first_counted_s": first["counted"]}


def summary(rows: list[dict]) -> dict:
    """Median and worst ratio over ``rows``, and the ratio of their summed times."""
    ratios = [r["ratio"] for r in rows]
    floors = [r["instrumented_ratio"] for r in rows]
    worst = max(rows, key=lambda r: r["ratio"])
    plain, counted = sum(r["plain_s"] for r in rows), sum(r["counted_s"] for r in rows)
    return {"variants": len(rows), "median_ratio": statistics.median(ratios), "worst_ratio": worst["ratio"],
            "worst_variant": f"{worst['chapter']}/{worst['variant']}", "plain_s": plain, "counted_s": counted,
            "total_ratio": counted / plain, "within_goal": sum(r <= GOAL for r in ratios),
            "median_instrumented_ratio": statistics.median(floors),
            "instrumented_over_goal": sum(f > GOAL for f in floors)}


def measure(chapter_names, repeats: int, report=print) -> dict:
    from .. import chapters
    from ..results import git_commit
    info = machine()
    load_before = os.getloadavg()
    report(f"{info['cpu']}, {info['cpu_count']} CPUs, {info['engine_threads']} engine threads, {info['compiler']}")
    report(f"{'chapter':<14} {'variant':<30} {'plain ms':>9} {'counted ms':>11} {'ratio':>6} {'instr.':>6}")
    rows = []
    for name in chapter_names:
        chapter = chapters.get(name)
        for variant in chapter.variants:
            if variant.gpu_only or variant.racy:
                continue
            row = time_variant(chapter, variant, repeats)
            rows.append(row)
            report(f"{name:<14} {variant.name:<30} {row['plain_s'] * 1e3:>9.2f} {row['counted_s'] * 1e3:>11.2f} "
                   f"{row['ratio']:>6.2f} {row['instrumented_ratio']:>6.2f}")
    per_chapter = {name: summary([r for r in rows if r["chapter"] == name]) for name in chapter_names
                   if any(r["chapter"] == name for r in rows)}
    return {"what": "count build (pmpp.counters) against the plain build: best-of-N seconds of one run of each "
                    "variant at its CPU-engine (notebook) size, the same worker and OS threads; 'instrumented': "
                    "the count build run without collecting (its hooks return at once), what the compiler's "
                    "instrumentation alone costs",
            "goal_ratio": GOAL, "machine": info, "commit": git_commit(), "repeats": repeats,
            "load_average": {"before": load_before, "after": os.getloadavg()},  # other work on the machine
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "overall": summary(rows), "chapters": per_chapter,
            "runs": rows}


def print_summary(result: dict, report=print) -> None:
    goal = f"<={GOAL:g}x"
    report(f"\n{'':<14} {'variants':>8} {'median':>7} {'worst':>7} {'total':>7} {goal:>6} {'instr.':>7} "
           f"{'instr.>' + goal[2:]:>8}  worst variant")
    for name, s in [*result["chapters"].items(), ("all", result["overall"])]:
        report(f"{name:<14} {s['variants']:>8} {s['median_ratio']:>6.2f}x {s['worst_ratio']:>6.2f}x "
               f"{s['total_ratio']:>6.2f}x {s['within_goal']:>6} {s['median_instrumented_ratio']:>6.2f}x "
               f"{s['instrumented_over_goal']:>8}  {s['worst_variant']}")


def main(argv=None):
    from .. import chapters
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each build per variant")
    parser.add_argument("--chapter", action="append", choices=chapters.names(),
                        help="only this chapter (may be repeated)")
    parser.add_argument("--out", help="where to write the JSON (default: results/count-cost/<cpu>-<n>cpu.json)")
    args = parser.parse_args(argv)
    result = measure(args.chapter or chapters.names(), max(1, args.repeats))
    print_summary(result)
    out = Path(args.out) if args.out else default_path(result["machine"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
