"""Grading a class: many submissions of one exercise, in parallel, into one CSV.

``pmpp grade reduction/05_coarsened submissions/ --csv grades.csv --feedback feedback/`` grades

* a folder of student folders (``submissions/alice/...``): each student's file is the one named
  like the exercise's kernel (``05_coarsened.cu``) anywhere in their folder, or their only ``.cu``;
* a folder of ``.cu`` files, one per student (``submissions/alice.cu``);
* or the files given (the student is the file's folder, or its name when files share a folder).

Each submission is graded in its own process, several at once (``--jobs``, default: the machine's
cores), all with the same seed, so every student gets the same inputs and the grades can be
repeated. A class larger than one machine splits into a CI matrix: one job per slice of the
folder, each with ``--seed`` fixed, and the CSVs concatenated.
"""
from __future__ import annotations

import csv
import os
import secrets
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import BackendUnavailableError
from ..exercises import exercises, find, manifest
from .deadlines import LatePolicy, file_time, late_policy, read_submission_times
from .grading import DEFAULT_TIMEOUT, find_submitted, grade
from .notebook_grading import grade_notebook, is_notebook_exercise
from ..markers import kernel_regions, stub_kernel
from ..notebooks import require_execution
from . import leaderboard
from .similarity import similar_pairs

CSV_FIELDS = ("student", "file", "sha256", "checks_passed", "checks", "points", "total", "passed",
              "seed", "similar_to")


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path | None          # None: no file found for this student
    problem: str = ""          # why no file was found


def collect(exercise: str, paths, any_name: bool = True) -> list[Submission]:
    """The submissions that ``paths`` (files and folders) hold, one per student. In a student's
    folder, the file named like the exercise's, else (``any_name``) the one file of its kind."""
    kernel_name = expected_file(exercise)
    found = []
    files = [Path(p) for p in paths if not Path(p).is_dir()]
    shared_folder = len({f.resolve().parent for f in files}) < len(files)
    for f in files:
        found.append(Submission(f.stem if shared_folder else f.resolve().parent.name, f))
    for folder in (Path(p) for p in paths if Path(p).is_dir()):
        students = sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
        if students:
            found += [_student_folder(d, kernel_name, any_name) for d in students]
        else:
            suffix = Path(kernel_name).suffix
            found += [Submission(f.stem, f) for f in sorted(folder.glob(f"*{suffix}"))]
    names = [s.student for s in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two submissions for {', '.join(twice)}; give each student one file")
    return found


def expected_file(exercise: str) -> str:
    """The name a submission of ``exercise`` has: ``05_coarsened.cu``, ``10_reduction.ipynb``."""
    if is_notebook_exercise(exercise):
        return Path(exercise).stem + ".ipynb"
    return f"{find(exercise).variant}.cu"


def _student_folder(folder: Path, kernel_name: str, any_name: bool = True) -> Submission:
    path, problem = find_submitted(folder, kernel_name, any_name=any_name)
    return Submission(folder.name, path, problem or "")


def grade_class(exercise: str, submissions, *, seed=None, timeout=None, jobs=None,
                on_report=None) -> list:
    """Grade every submission (same seed for all); reports in the submissions' order.
    ``on_report(report)`` is called as each finishes."""
    seed = secrets.randbelow(2 ** 31) if seed is None else int(seed)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(submissions) or 1))
    if is_notebook_exercise(exercise):
        require_execution()        # before any student is scored: a missing package is the grader's
    options = dict(seed=seed, timeout=timeout or DEFAULT_TIMEOUT)
    reports = [None] * len(submissions)
    with ProcessPoolExecutor(max_workers=jobs, initializer=_share_cores, initargs=(jobs,)) as pool:
        futures = {pool.submit(_grade_one, exercise, s, options): i for i, s in enumerate(submissions)}
        for future in as_completed(futures):
            index = futures[future]
            try:
                report = future.result()
            except BackendUnavailableError:
                raise                        # what the grader lacks, not what the student did
            except Exception as exc:         # the grading process died (out of memory, killed)
                failed = Submission(submissions[index].student, None,
                                    f"the grader failed on this submission ({type(exc).__name__}: {exc})")
                report = _grade_one(exercise, failed, options)
            reports[index] = report
            if on_report:
                on_report(report)
    return reports


def _share_cores(jobs: int) -> None:
    """Each grading process runs the CPU engine on its share of the cores."""
    os.environ.setdefault("PMPP_CPU_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))


def _grade_one(exercise: str, submission: Submission, options: dict):
    missing = None if submission.path else submission.problem
    if is_notebook_exercise(exercise):
        return grade_notebook(exercise, submission.path or ".", student=submission.student,
                              missing=missing)
    return grade(exercise, submission.path, student=submission.student, missing=missing, **options)


def write_csv(reports, path, pairs=()) -> None:
    """One row per student; ``similar_to``: the others whose submission is alike (see
    :func:`similar_submissions`), with the share of fingerprints they have in common."""
    alike = {}
    for a, b, share in pairs:
        alike.setdefault(a, []).append(f"{b} {share:.2f}")
        alike.setdefault(b, []).append(f"{a} {share:.2f}")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in reports:
            writer.writerow({"student": r.student, "file": r.submission, "sha256": r.sha256 or "",
                             "checks_passed": sum(c.passed for c in r.checks),
                             "checks": len(r.checks), "points": f"{r.points:g}",
                             "total": f"{r.max_points:g}", "passed": r.passed, "seed": r.seed,
                             "similar_to": "; ".join(alike.get(r.student, []))})


def similar_submissions(exercise: str, submissions) -> list[tuple[str, str, float]]:
    """Pairs of students whose kernel files are alike beyond :data:`pmpp.course.similarity.THRESHOLD`,
    once the code every student was given (the exercise's file with its solution stubbed) is taken
    out; none for notebook exercises."""
    if is_notebook_exercise(exercise):
        return []
    texts = {}
    for s in submissions:
        try:
            texts[s.student] = Path(s.path).read_text(errors="replace") if s.path else None
        except OSError:
            texts[s.student] = None
    return similar_pairs({k: v for k, v in texts.items() if v}, given=[_starter(exercise)])


def _starter(exercise: str) -> str:
    """The exercise's file as a student receives it: its solution regions stubbed."""
    ex = find(exercise)
    text = ex.path.read_text()
    regions, _ = kernel_regions(text, f"kernels/{ex.name}.cu", ex.name, {e.name for e in exercises()})
    return stub_kernel(text, regions, ex.name)


def write_feedback(reports, folder) -> list[Path]:
    """One text file per student: their verdict, as ``pmpp grade`` prints it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for r in reports:
        path = folder / f"{r.student}.txt"
        path.write_text(str(r) + "\n")
        written.append(path)
    return written


def gradebook(items: Sequence[str], class_dir, *, seed=None, timeout=None, jobs=None,
              on_report=None) -> dict[str, dict[str, object]]:
    """Grade every student folder of ``class_dir`` on each of ``items`` (exercises and notebooks),
    all with one seed: {student: {item: report}}. A student without an item's file gets that
    item's report saying so (no points)."""
    seed = secrets.randbelow(2 ** 31) if seed is None else int(seed)
    book: dict[str, dict[str, object]] = {}
    for item in items:
        # a folder holds several exercises' files: each is found by its own name only
        submissions = collect(item, [class_dir], any_name=False)
        for report in grade_class(item, submissions, seed=seed, timeout=timeout, jobs=jobs, on_report=on_report):
            book.setdefault(report.student, {})[item] = report
    return dict(sorted(book.items()))


def write_gradebook(book, items: Sequence[str], path, policy: LatePolicy | None = None, times=None) -> None:
    """One row per student: the points of each item (less the late policy's penalty), the total
    and the most there was to get; then, for each item with a deadline, the days it was late.
    ``times``: {(student, item): when submitted}, else each submitted file's modification time."""
    policy = policy or LatePolicy()
    dated = [i for i in items if i in policy.deadlines]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *items, "total", "max_total", *(f"{i} days late" for i in dated)])
        for student, reports in book.items():
            late = {i: lateness(policy, student, i, reports.get(i), times) for i in items}
            points = [reports[i].points * policy.share_kept(late[i]) if i in reports else 0.0 for i in items]
            most = sum(reports[i].max_points for i in items if i in reports)
            writer.writerow([student, *(f"{p:g}" for p in points), f"{sum(points):g}", f"{most:g}",
                             *(late[i] for i in dated)])


def lateness(policy: LatePolicy, student: str, item: str, report, times=None) -> int:
    """Days ``student``'s submission of ``item`` was late: its time from ``times``, else its file's."""
    if report is None or item not in policy.deadlines:
        return 0
    when = (times or {}).get((student, item)) or file_time(report.submission)
    return policy.days_late(item, when)


def gradebook_main(args) -> int:
    """``pmpp gradebook CLASS_DIR ITEM... --csv F [--feedback DIR] [--submitted-at TIMES.csv]``."""
    import sys
    policy = late_policy(manifest())
    times = read_submission_times(args.submitted_at) if args.submitted_at else None
    seed = secrets.randbelow(2 ** 31) if args.seed is None else args.seed
    print(f"grading {args.class_dir} on {', '.join(args.items)}, seed {seed}", file=sys.stderr, flush=True)
    if any(i in policy.deadlines for i in args.items):
        source = args.submitted_at if times is not None else "each submitted file's modification time"
        print(f"deadlines from exercises.toml; when each was submitted: {source}", file=sys.stderr, flush=True)
    book = gradebook(args.items, args.class_dir, seed=seed, timeout=args.timeout, jobs=args.jobs)
    write_gradebook(book, args.items, args.csv, policy, times)
    if args.feedback:
        folder = Path(args.feedback)
        folder.mkdir(parents=True, exist_ok=True)
        for student, reports in book.items():
            notes = [_late_note(policy, i, lateness(policy, student, i, r, times)) for i, r in reports.items()]
            (folder / f"{student}.txt").write_text("\n\n".join(str(r) for r in reports.values()) + "\n"
                                                   + "".join(n for n in notes if n))
    for student, reports in book.items():
        kept = sum(r.points * policy.share_kept(lateness(policy, student, i, r, times)) for i, r in reports.items())
        print(f"{student:<24} {kept:g}/{sum(r.max_points for r in reports.values()):g}")
    return 0


def _late_note(policy: LatePolicy, item: str, days: int) -> str:
    if days <= 0:
        return ""
    return (f"\n{item}: {days} day{'s' if days > 1 else ''} late (due {policy.deadlines[item].isoformat()}): "
            f"{policy.share_kept(days):.0%} of its points kept\n")


def class_main(args) -> int:
    """``pmpp grade EXERCISE SUBMISSION... [--csv F] [--feedback DIR]``: a line per student as each
    finishes, then the files asked for; 0 if every submission passed."""
    import json
    import sys
    submissions = collect(args.exercise, args.submissions)
    if not submissions:
        raise ValueError(f"no submissions in {', '.join(args.submissions)}: give .cu files, a folder "
                         "of .cu files, or a folder of student folders")
    seed = secrets.randbelow(2 ** 31) if args.seed is None else args.seed
    print(f"grading {len(submissions)} submission(s) of {args.exercise}, seed {seed}",
          file=sys.stderr, flush=True)

    def show(report):
        print(f"{report.student:<24} {'PASS' if report.passed else 'FAIL'} "
              f"{report.points:g}/{report.max_points:g}", flush=True)

    reports = grade_class(args.exercise, submissions, seed=seed, timeout=args.timeout,
                          jobs=args.jobs, on_report=None if args.quiet else show)
    pairs = similar_submissions(args.exercise, submissions)
    for a, b, share in pairs:
        print(f"alike: {a} and {b} share {share:.0%} of their fingerprints (starter code taken out)",
              file=sys.stderr)
    if args.csv:
        write_csv(reports, args.csv, pairs)
    if args.feedback:
        write_feedback(reports, args.feedback)
    if args.leaderboard:
        for path in leaderboard.write(reports, args.leaderboard):
            print(f"leaderboard: {path}", file=sys.stderr)
    if args.json:
        text = json.dumps([r.as_dict() for r in reports], indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0 if all(r.passed for r in reports) else 1
