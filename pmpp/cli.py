"""The ``pmpp`` command: list, run, bench, tune, profile, check-kernels, notebooks, exercises, grade, gradebook, course, release."""
from __future__ import annotations

import argparse
import os
import sys

from . import chapters
from .backends import backend_info, resolve_backend
from .errors import PmppError


def main(argv=None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "command", None) == "grade" and not any(a.startswith("-") for a in extra):
        args.submissions += extra          # submissions after an option: grade EX --seed 1 a.cu
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except (PmppError, KeyError, ValueError, FileNotFoundError) as exc:
        print(f"pmpp {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:            # `pmpp ... | head` closed the pipe: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pmpp", description="The PMPP CUDA workbook.")
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser("list", help="chapters and their variants")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="check every variant and print time / GB/s / GFLOP/s / OP/B")
    p.add_argument("chapter", help="a chapter name, or 'all'")
    p.add_argument("--backend", default="auto", help="auto (default), cupy or cpu")
    p.add_argument("--n", type=int, help="problem size (default: the chapter's size for the backend)")
    p.add_argument("--variants", nargs="*", help="only these variants (names or numbers)")
    p.add_argument("--torch", action="store_true",
                   help="also time the PyTorch routines on a GPU (importing PyTorch takes seconds)")
    p.add_argument("--predict", metavar="GPU",
                   help="on the CPU engine: the GPU whose time is predicted beside each variant (default: the "
                        "GPU $PMPP_TARGET names, else the H100; 'none': no prediction)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="measure on the GPU and record the results as JSON")
    p.add_argument("chapter", nargs="+", help="chapter names, or 'all'")
    p.add_argument("--out", help="results file (default: results/<device>-<commit>.json)")
    p.add_argument("--n", type=int, help="problem size (default: the chapter's GPU size)")
    p.add_argument("--all-problems", action="store_true",
                   help="also the chapter's other benchmark problems (dtypes, shapes, sweeps)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("tune", help="on a GPU: search each variant's tunable parameters (block size, coarsening, "
                                    "tiles, stages, time steps), check every candidate, and record the best "
                                    "for this GPU model in results/tuned/, which run, bench and the notebooks use")
    p.add_argument("chapter", nargs="+", help="chapter names, or 'all'")
    p.add_argument("--variants", nargs="*", help="only these variants (names or numbers)")
    p.add_argument("--out", help="recording (default: results/tuned/<gpu>.json)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("profile", help="why each variant is fast: counters per variant (CPU engine or "
                                       "Nsight Compute), DRAM traffic (Nsight Compute)")
    p.add_argument("chapter", nargs="+", help="chapter names, or 'all'")
    p.add_argument("--variants", nargs="*", help="only these variants (names or numbers)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--cpu", action="store_true",
                     help="count on the CPU engine (no GPU needed): sectors per request, bank conflicts, "
                          "active lanes, occupancy on H100 and T4")
    how.add_argument("--stalls", action="store_true",
                     help="on a GPU with ncu: what bounds each variant at the GPU size (DRAM and issue "
                          "throughput, occupancy, warp stall reasons) in results/stalls/; --variants may "
                          "name library routines too")
    how.add_argument("--counters", action="store_true",
                     help="on a GPU with ncu: record Nsight Compute's counters of every variant at the CPU "
                          "engine's size in results/counters/ (what the engine is checked against)")
    p.add_argument("--out", help="recording (default: results/dram/ or results/counters/<device>-<commit>.json)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("notebooks", help="re-execute the notebooks in place, outputs and figures kept "
                                         "(what is committed), and stamp nbgrader's metadata")
    p.add_argument("names", nargs="*", help="only these notebooks (e.g. 10_reduction); default: all")
    p.set_defaults(func=cmd_notebooks)

    p = sub.add_parser("exercises", help="the exercises: variants left for the student")
    p.add_argument("--nbgrader", action="store_true",
                   help="write nbgrader's cell metadata into the notebooks from their exercise markers")
    p.set_defaults(func=cmd_exercises)

    p = sub.add_parser("grade", help="grade submissions: correctness, races, bounds, points, time")
    p.add_argument("exercise", help="e.g. reduction/05_coarsened (see 'pmpp exercises'), or a "
                                    "notebook (10_reduction) to grade its exercises and hidden tests")
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION",
                   help="the submitted .cu file(s), relative to this folder, or a folder of student "
                        "folders (default: the exercise's own file in the workbook)")
    p.add_argument("--seed", type=int, help="the inputs' random seed (default: a fresh one, printed "
                                            "with the verdict); the same seed repeats a verdict")
    p.add_argument("--json", help="write the verdict(s) as JSON to this file ('-' for stdout)")
    p.add_argument("--csv", help="write one row per submission (student, file, checks, points, "
                                 "total) to this file")
    p.add_argument("--feedback", metavar="DIR", help="write each student's verdict to DIR/STUDENT.txt")
    p.add_argument("--leaderboard", metavar="DIR", help="write DIR/leaderboard.csv and .html: the submissions "
                   "that passed, best first (GPU time where timed, then the performance criteria's counts)")
    p.add_argument("--jobs", type=int, help="submissions graded at once (default: the machine's cores)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per launch (default 30)")
    p.add_argument("--quiet", action="store_true", help="no progress while grading")
    p.add_argument("--gradescope", metavar="FILE", help="also write the verdict as Gradescope's results.json")
    p.add_argument("--prairielearn", metavar="FILE", help="also write the verdict as PrairieLearn's results.json")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("gradebook", help="grade a class folder on several exercises and notebooks: one CSV")
    p.add_argument("class_dir", metavar="CLASS_DIR", help="a folder of student folders")
    p.add_argument("items", nargs="+", metavar="ITEM",
                   help="exercises (reduction/05_coarsened) and notebooks (10_reduction) to grade")
    p.add_argument("--csv", required=True, help="the gradebook: a row per student, a column per item, the total")
    p.add_argument("--feedback", metavar="DIR", help="write each student's verdicts to DIR/STUDENT.txt")
    p.add_argument("--submitted-at", metavar="TIMES.csv",
                   help="when each was submitted (columns student, item, submitted_at), for the deadlines "
                        "of exercises.toml; default: each submitted file's modification time")
    p.add_argument("--seed", type=int, help="the inputs' random seed, the same for every item and student")
    p.add_argument("--jobs", type=int, help="submissions graded at once (default: the machine's cores)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per launch (default 30)")
    p.set_defaults(func=cmd_gradebook)

    p = sub.add_parser("course", help="autograders for Gradescope and PrairieLearn (they grade with the CPU engine)")
    p.add_argument("platform", choices=("gradescope", "prairielearn"))
    p.add_argument("exercises", nargs="+", metavar="EXERCISE", help="the exercises it grades, e.g. reduction/05_coarsened")
    p.add_argument("-o", "--out", required=True,
                   help="Gradescope: the autograder .zip to write; PrairieLearn: the folder for serverFilesCourse/")
    p.set_defaults(func=cmd_course)

    p = sub.add_parser("release", help="write the student version of the workbook")
    p.add_argument("folder", nargs="?", metavar="DIR", help="an empty folder, or an earlier release to update")
    p.add_argument("--student", metavar="DIR", help="the same as DIR")
    p.add_argument("--with-solution", action="append", default=[], metavar="EXERCISE",
                   help="release this exercise's solution too (repeatable), e.g. after its deadline")
    p.add_argument("--url", default="", metavar="GIT_URL",
                   help="the git URL students clone the release from: written into each notebook's setup "
                        "cell, so that on Colab or Kaggle it installs the workbook by itself")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("check-kernels", help="compile every kernel with nvcc for each GPU from the T4 to the "
                                             "H100; registers, shared memory, spills")
    p.add_argument("chapter", nargs="*", help="chapters (default: all)")
    p.add_argument("--arch", nargs="+", help="archs to compile for (default: sm_75 sm_80 sm_86 sm_89 sm_90)")
    p.set_defaults(func=cmd_check_kernels)
    return parser


def _chapters(names):
    names = [names] if isinstance(names, str) else names
    return [chapters.get(n) for n in (chapters.names() if "all" in names else names)]


def cmd_list(args) -> int:
    for chapter in (chapters.get(n) for n in chapters.names()):
        print(f"{chapter.name}: {chapter.title}")
        for v in chapter.variants:
            print(f"  {v.name:<32} {v.source:<18} {v.title}")
    return 0


def _problem(chapter, backend, n):
    from .runner import default_problem
    problem = default_problem(chapter, backend)
    if n is not None:
        problem["n"] = n
    return problem


def cmd_run(args) -> int:
    from .profiling.predict import add_predictions
    from .progress import progress
    from .runner import QUICK_REPEATS, format_table, measure, precompile, split_stubs
    from .tuning import for_this_gpu
    backend = resolve_backend(args.backend)
    print(backend_info(backend), flush=True)
    plan = [(chapter, *split_stubs(chapter, [chapter.variant(v) for v in args.variants]
                                   if args.variants else chapter.variants))
            for chapter in _chapters(args.chapter)]
    precompile([(chapter, variants) for chapter, variants, _ in plan], backend)
    failed, stubs, not_run = [], 0, 0
    gpu, predicted_note = _predicted_gpu(args.predict), None
    with progress(sum(len(variants) + len(chapter.library) for chapter, variants, _ in plan), "pmpp run") as bar:
        for chapter, variants, notes in plan:
            problem = _problem(chapter, backend, args.n)
            bar.print(f"\n== {chapter.title}: {chapter.describe(problem)} ==")
            for note in notes:
                bar.print(f"  {note}")
            _say_tuned(chapter, variants, backend, bar)
            stubs += len(notes)
            if not variants:
                continue
            failed += _verify_sizes(chapter, variants, backend, bar)
            entries = measure(chapter, backend=backend, problem=problem, variants=for_this_gpu(chapter, variants, backend),
                              skipped=True, repeats=QUICK_REPEATS[backend], torch=args.torch, progress=bar)
            if backend == "cpu" and gpu is not None:
                bar.note(f"{chapter.name}: predicting the {gpu}")
                predicted_note = add_predictions(chapter, entries, gpu)
            bar.print(format_table(entries))
            not_run += sum(1 for e in entries if e.get("skipped") and e["kind"] == "variant")
            for e in entries:
                if e["correct"] is False and _racy(chapter, e["name"]):
                    bar.print(f"  {e['name']}: wrong, as expected - a teaching example of a bug "
                              "(pmpp.load(..., check=True) names it)")
            failed += [f"{chapter.name}/{e['name']}" for e in entries
                       if e["correct"] is False and not _racy(chapter, e["name"])]
    if backend == "cpu":
        print("\nTimes above are CPU-engine times: they check the kernels, not GPU performance.")
        if predicted_note:
            print(predicted_note)
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("\nEvery variant matched the reference (the teaching examples of bugs aside)"
          + (f"; {not_run} cannot run here (above, with the reason)" if not_run else "")
          + (f"; {stubs} not implemented yet (above)." if stubs else "."))
    return 0


def _predicted_gpu(name: str | None) -> str | None:
    """The GPU `pmpp run --predict` names (None: 'none'), else $PMPP_TARGET's, else the H100."""
    from .gpus import gpu_spec
    from .targets import target_from_env
    if name is not None:
        return None if name.lower() == "none" else gpu_spec(name).name
    spec = target_from_env()
    return spec.name if spec is not None else "H100"


def _say_tuned(chapter, variants, backend, bar) -> None:
    """Name the tuned configurations a GPU run uses (pmpp.tuning), if any."""
    if backend == "cupy":
        from .tuning import current_gpu, describe
        if line := describe(chapter, variants, current_gpu()):
            bar.print(f"  {line}")


def _racy(chapter, name) -> bool:
    return any(v.name == name and v.racy for v in chapter.variants)


def _verify_sizes(chapter, variants, backend, bar=None) -> list[str]:
    """Check each variant at the chapter's awkward sizes; print and return the failures."""
    from .progress import Quiet
    from .runner import verify
    bar = bar or Quiet()
    failed = []
    for variant in variants:
        for n in chapter.test_sizes:
            problem = {**chapter.problems["cpu"], "n": n}
            if not variant.supports(problem, backend):
                continue
            bar.note(f"{chapter.name}/{variant.name} n={n}")
            result = verify(chapter, variant, problem, backend=backend)
            if not result and not variant.racy:
                bar.print(f"  {variant.name} at n={n}: WRONG ({result.detail or result.error})")
                failed.append(f"{chapter.name}/{variant.name}@n={n}")
    return failed


def _need_gpu(why: str) -> None:
    """Stop a GPU-only command on a machine without a GPU, saying ``why`` and what to do instead."""
    if resolve_backend("auto") != "cupy":
        raise PmppError(why)


def cmd_bench(args) -> int:
    from .device import ceilings
    from .progress import progress
    from .results import default_path, write_results
    from .runner import format_table, measure_problems, precompile, timed
    from .tuning import for_this_gpu
    _need_gpu("pmpp bench records GPU measurements and needs a GPU; on the CPU engine use 'pmpp run' "
              "(its times are CPU times)")
    limits = ceilings()
    out = args.out or default_path()
    print(backend_info("cupy"))
    print(f"measured ceilings: {limits}", flush=True)
    plan = [(chapter, key, [_problem(chapter, "cupy", args.n)] if key == chapter.name else bench_set.problems,
             bench_set.variants)
            for chapter in _chapters(args.chapter)
            for key, bench_set in chapter.bench_sets()[:None if args.all_problems else 1]]
    steps = sum(len(problems) * (len(variants if variants is not None else chapter.variants) + len(chapter.library))
                for chapter, _, problems, variants in plan)
    precompile([(chapter, chapter.variants) for chapter in _chapters(args.chapter)], "cupy")
    with progress(steps, "pmpp bench") as bar:
        for chapter, key, problems, variants in plan:
            def report(problem, entries, chapter=chapter, variants=variants):
                bar.print(f"\n== {chapter.title}: {chapter.describe(problem)} ==")
                _say_tuned(chapter, [v if not isinstance(v, str) else chapter.variant(v)
                                     for v in (variants if variants is not None else chapter.variants)], "cupy", bar)
                bar.print(format_table(entries))

            entries = measure_problems(chapter, problems, backend="cupy", report=report, skipped=True, progress=bar,
                                       variants=for_this_gpu(chapter, variants if variants is not None
                                                             else chapter.variants, "cupy"))
            write_results(out, key, timed(entries), limits)
    print(f"\nwrote {out}")
    return 0


def cmd_tune(args) -> int:
    from .progress import progress
    from .results import device_info, git_commit, versions
    from .tuning import recording_path, space, tune_variant, write
    _need_gpu("pmpp tune times configurations on a GPU and needs one; without a GPU, "
              "pmpp run checks any configuration on the CPU engine: pmpp.load(..., defines={...})")
    plan = [(chapter, [v for v in (chapter.variants if not args.variants else map(chapter.variant, args.variants))
                       if v.tunables]) for chapter in _chapters(args.chapter)]
    device, software, commit = device_info("cupy"), versions("cupy"), git_commit() or "unknown"
    out = args.out or recording_path(device["name"])
    print(f"{backend_info('cupy')}\ntuning for the {device['name']}, recording in {out}", flush=True)
    with progress(sum(len(variants) for _, variants in plan), "pmpp tune") as bar:
        for chapter, variants in plan:
            for variant in variants:
                found = tune_variant(chapter, variant, progress=bar)
                write(out, f"{chapter.name}/{variant.name}", found, device=device, software=software, commit=commit)
                bar.print(_tuned_line(chapter, variant, found, len(space(variant))))
                bar.advance(f"{chapter.name}/{variant.name}")
    print(f"\nwrote {out}")
    return 0


def _tuned_line(chapter, variant, found, size) -> str:
    setting = " ".join(f"{k}={v}" for k, v in found["config"].items())
    versus = (f", default {found['default_us']:.1f} µs ({found['default_us'] / found['median_us']:.2f}x)"
              if found["default_us"] else ", the default did not run")
    margin = f"; runner-up +{found['runner_up_margin'] - 1:.1%}" if found["runner_up_margin"] else ""
    return (f"{chapter.name}/{variant.name}: {setting} {found['median_us']:.1f} µs{versus}{margin} "
            f"({found['candidates']} of {size} configurations tried, {len(found['rejected'])} rejected)")


def cmd_profile(args) -> int:
    if args.cpu:
        return cmd_profile_cpu(args)
    if args.counters:
        return cmd_profile_counters(args)
    if args.stalls:
        return cmd_profile_stalls(args)
    from .profiling.profile import default_path, dram_traffic, find_ncu, write_profile
    _need_gpu("pmpp profile measures DRAM traffic on a GPU with Nsight Compute; this machine has none (the "
              "notebooks show the recorded profile from results/dram/; 'pmpp profile --cpu' counts on the CPU engine)")
    ncu, out = find_ncu(), args.out or default_path()
    _profile_at_gpu_size(
        [(chapter, _variant_names(chapter, args.variants)) for chapter in _chapters(args.chapter)], "pmpp profile",
        lambda chapter, problem, name: dram_traffic(chapter, problem, [name], ncu=ncu),
        lambda row: [f"{row['variant']:32} read {row['dram_read_bytes'] / 1e6:10.1f} MB   "
                     f"write {row['dram_write_bytes'] / 1e6:10.1f} MB"],
        lambda chapter, problem, rows: write_profile(out, chapter.name, problem, rows))
    print(f"\nwrote {out}")
    return 0


def _profile_at_gpu_size(plan, what: str, measure, show, write) -> None:
    """Profile each name of each (chapter, names) in ``plan``, one at a time, at the chapter's GPU size:
    ``measure(chapter, problem, name)`` gives rows, ``show(row)`` the lines printed for each, and
    ``write(chapter, problem, rows)`` records a chapter's rows."""
    from .progress import progress
    with progress(sum(len(names) for _, names in plan), what) as bar:
        for chapter, names in plan:
            problem = _problem(chapter, "cupy", None)
            rows = []
            for name in names:
                bar.note(f"{chapter.name}/{name}")
                rows += measure(chapter, problem, name)
                bar.advance()
            bar.print(f"\n== {chapter.title}: {chapter.describe(problem)} ==")
            for row in rows:
                for line in show(row):
                    bar.print(line)
            write(chapter, problem, rows)


def _variant_names(chapter, wanted) -> list[str]:
    return [chapter.variant(v).name for v in wanted] if wanted else [v.name for v in chapter.variants]


def cmd_profile_cpu(args) -> int:
    from .profiling.explain import ChapterTable, chapter_table, format_chapter_table
    from .profiling.predict import predict_variant_or_none
    from .progress import progress
    gpu = _predicted_gpu(None)
    plan = [(chapter, _variant_names(chapter, args.variants)) for chapter in _chapters(args.chapter)]
    with progress(sum(len(names) for _, names in plan), "pmpp profile --cpu") as bar:
        for chapter, names in plan:
            bar.print(f"\n== {chapter.title}: {chapter.describe(chapter.problems['cpu'])}, counted on the CPU engine ==")
            rows = ChapterTable()
            for name in names:
                bar.note(f"{chapter.name}/{name}")
                rows += chapter_table(chapter, [name])
                if rows and rows[-1]["variant"] == name:
                    rows[-1]["predicted"] = predict_variant_or_none(chapter, name, gpu)
                bar.advance()
            bar.print(format_chapter_table(rows))
    print("\nCounters are Nsight Compute's, counted by the CPU engine for one launch of each variant (the sum "
          "over its launches); occupancy is theoretical, from the kernel's registers and shared memory. "
          f"pred. {gpu} us: the time pmpp's model predicts at the chapter's GPU size, and the resource that bounds "
          "it (pmpp.predict; docs/predicted.md).")
    return 0


def cmd_profile_stalls(args) -> int:
    from .profiling.ncu import stall_profile, write_stalls
    from .profiling.profile import find_ncu, recording_path
    _need_gpu("pmpp profile --stalls reads Nsight Compute on a GPU; this machine has none (the notebooks "
              "show the recordings in results/stalls/)")
    ncu, out = find_ncu(), args.out or recording_path("stalls")
    figures = (("DRAM", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
               ("issue", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
               ("warps", "sm__warps_active.avg.pct_of_peak_sustained_active"))
    _profile_at_gpu_size(
        [(chapter, args.variants or [v.name for v in chapter.variants]) for chapter in _chapters(args.chapter)],
        "pmpp profile --stalls",
        lambda chapter, problem, name: stall_profile(chapter, problem, [name], ncu=ncu),
        lambda row: [f"{row['name'][:28]:28} {k['kernel'][:40]:40} " + "  ".join(
            f"{label} {k['metrics'].get(metric, float('nan')):5.1f}%" for label, metric in figures) for k in row["kernels"]],
        lambda chapter, problem, rows: write_stalls(out, chapter.name, problem, rows))
    print(f"\nwrote {out}")
    return 0


def cmd_profile_counters(args) -> int:
    from .profiling.ncu import default_path, find_ncu, profile_chapter, write_recording
    from .progress import progress
    _need_gpu("pmpp profile --counters records Nsight Compute's counters on a GPU; this machine has none: "
              "'pmpp profile --cpu' counts on the CPU engine (the recording is in results/counters/)")
    ncu = find_ncu()
    out = args.out or default_path()
    chosen = _chapters(args.chapter)
    with progress(len(chosen), "pmpp profile --counters") as bar:
        for chapter in chosen:
            bar.note(chapter.name)
            recorded = profile_chapter(chapter, ncu=ncu, variants=args.variants)
            launches = sum(len(v["launches"]) for v in recorded["variants"])
            bar.print(f"{chapter.name}: {len(recorded['variants'])} variants, {launches} launches"
                      f"{', skipped ' + ', '.join(recorded['skipped']) if recorded['skipped'] else ''}"
                      f"{', ncu refused ' + ', '.join(recorded['refused']) if recorded['refused'] else ''}")
            write_recording(out, chapter.name, recorded)
            bar.advance()
    print(f"\nwrote {out}")
    return 0


def cmd_notebooks(args) -> int:
    import time

    from .notebooks import execute, notebook_paths
    print(backend_info(), flush=True)
    failed = 0
    for path in notebook_paths(args.names):
        start = time.perf_counter()
        errors = execute(path)
        failed += bool(errors)
        print(f"{path.name}: {'FAILED' if errors else 'ok'} ({time.perf_counter() - start:.0f} s)"
              + "".join(f"\n    {e}" for e in errors), flush=True)
    return 1 if failed else 0


def cmd_exercises(args) -> int:
    from .exercises import exercises
    from .notebooks import stamp_notebooks
    if args.nbgrader:
        for path in stamp_notebooks():
            print(f"nbgrader metadata written: {path}")
        return 0
    for exercise in exercises():
        print(f"{exercise.name:<32} {exercise.path}")
    return 0


def cmd_grade(args) -> int:
    from .course.classroom import class_main
    from .course.grading import grade_main
    from .course.notebook_grading import is_notebook_exercise
    if is_notebook_exercise(args.exercise):
        if not args.submissions:
            raise ValueError(f"give the student's notebook: pmpp grade {args.exercise} PATH.ipynb")
        return class_main(args)
    one_file = len(args.submissions) <= 1 and not any(map(os.path.isdir, args.submissions))
    if args.gradescope or args.prairielearn:
        if not one_file:
            raise ValueError("--gradescope and --prairielearn write one submission's results: give one file")
        return _grade_for_platforms(args)
    if one_file and not (args.csv or args.feedback or args.leaderboard):
        return grade_main(args.exercise, (args.submissions or [None])[0], json_out=args.json,
                          timeout=args.timeout, seed=args.seed, quiet=args.quiet, predict=_grade_predictor())
    return class_main(args)


def _grade_predictor():
    """What `pmpp grade` predicts a passing submission's GPU time with, on a machine without a GPU:
    the time model on the GPU $PMPP_TARGET names, else the H100."""
    from .profiling.predict import predict_variant
    gpu = _predicted_gpu(None)
    return lambda chapter, variant, path, timeout: predict_variant(chapter, variant, gpu, path=path, timeout=timeout)


def _grade_for_platforms(args) -> int:
    from .course.autograders import gradescope_results, prairielearn_results, write_json
    from .backends import gpu_available
    from .course.grading import grade
    report = grade(args.exercise, (args.submissions or [None])[0], timeout=args.timeout, seed=args.seed,
                   predict=_grade_predictor())
    print(report)
    gpu = gpu_available()
    if args.gradescope:
        write_json(gradescope_results([report], gpu=gpu), args.gradescope)
    if args.prairielearn:
        write_json(prairielearn_results([report], gpu=gpu), args.prairielearn)
    return 0 if report.passed else 1


def cmd_gradebook(args) -> int:
    from .course.classroom import gradebook_main
    return gradebook_main(args)


def cmd_course(args) -> int:
    from .course.autograders import build_gradescope, build_prairielearn
    build = build_gradescope if args.platform == "gradescope" else build_prairielearn
    out = build(args.exercises, args.out)
    print(f"{args.platform} autograder for {', '.join(args.exercises)}: {out}")
    return 0


def cmd_release(args) -> int:
    from .course.release import release
    folder = args.folder or args.student
    if not folder:
        raise PmppError("name the folder to write, e.g. pmpp release ../pmpp-student")
    done = release(folder, solutions=args.with_solution, workbook_url=args.url)
    released = f" but those released: {', '.join(args.with_solution)}" if args.with_solution else ""
    print(f"student release in {done.folder}: {len(done.files)} files, {len(done.changed)} written, "
          f"{len(done.removed)} removed; checked: no exercise's solution in them{released}")
    return 0


def cmd_check_kernels(args) -> int:
    import time

    from .compilecheck import FAILED, arch_summary, check_kernels, format_arch_table
    from .targets import ARCHS
    archs = args.arch or list(ARCHS)
    start = time.perf_counter()
    rows = check_kernels(kernel_targets(args.chapter or chapters.names()), archs=archs, keep_going=True)
    print(format_arch_table(rows, archs))
    for arch, counts in arch_summary(rows, archs).items():
        print(f"{arch}: {counts['ok']} compiled, {counts['needs newer']} need a newer GPU, "
              f"{counts['failed']} failed")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 1 if any(r["status"] == FAILED for r in rows) else 0


def kernel_targets(names, arch: str | None = None) -> list:
    """(kernel path, defines, name expressions, min_arch) of every variant of the chapters
    ``names``; with ``arch`` (e.g. "sm_80") only those it can run: one that needs sm_90 is left
    out for sm_80."""
    from .compilecheck import arch_number
    number = None if arch is None else arch_number(arch)
    return [(chapter.kernel_path(v), dict(v.defines), tuple(v.name_expressions), v.min_arch)
            for chapter in map(chapters.get, names) for v in chapter.variants
            if number is None or v.min_arch <= number]

if __name__ == "__main__":
    sys.exit(main())
