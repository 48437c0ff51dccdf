"""Grading: a submission checked against the chapter's reference.

:func:`grade` runs a fixed list of checks, each worth the points ``kernels/exercises.toml`` gives
it: the file compiles; at each of the chapter's awkward sizes it is right on random inputs (on the
CPU engine, with its race, bounds and barrier checks) and exact on inputs that every correct
summation order sums exactly; on a GPU, right at full size, timed beside the reference solution.
The inputs come from ``seed`` (a fresh one by default, recorded in the verdict), so the same seed
gives the same verdict. Every failure is a verdict with a reason, never a traceback.
:mod:`pmpp.course.classroom` grades many submissions at once.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__, chapters
from ..backends.cpu import sandbox
from ..backends.cpu.sandbox import SandboxViolation
from ..backends import gpu_available
from ..errors import (CompileError, ExerciseNotImplemented, KernelCheckError, KernelCrashError,
                     KernelTimeoutError, PmppError)
from ..counters import counted_run, counting_module
from ..exercises import STUB_MARK, find
from ..markers import stubs_in
from ..runner import default_problem, load_variant, problem_for, verify

DEFAULT_TIMEOUT = 30.0


@dataclass
class Check:
    name: str
    passed: bool
    reason: str = ""
    points: float = 0.0          # earned
    max_points: float = 0.0
    size: str = ""               # the problem size it ran at, if any ("n=1000")
    ran: bool = True             # False: not run on this machine (no GPU), counting for nothing
    measured: float | None = None  # a performance check: the counter's value, within its bound or not


@dataclass
class GradeReport:
    exercise: str
    submission: str
    sha256: str | None = None
    student: str | None = None
    seed: int | None = None
    time: str = ""
    workbook: str = ""
    contained: str = ""          # how the submission was contained, or why it was not
    checks: list = field(default_factory=list)
    gpu_time_us: float | None = None
    reference_time_us: float | None = None
    gpu: str = ""                # the GPU that timed it, if one did
    # without a GPU: the time pmpp's model predicts from the CPU engine's counts (pmpp.predict)
    predicted_us: float | None = None
    predicted_reference_us: float | None = None
    predicted_bound: str = ""
    predicted_gpu: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks if c.ran)

    @property
    def points(self) -> float:
        return sum(c.points for c in self.checks)

    @property
    def max_points(self) -> float:
        return sum(c.max_points for c in self.checks)

    def as_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed, "points": self.points,
                "max_points": self.max_points}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def __str__(self) -> str:
        digest = f", sha256 {self.sha256[:12]}" if self.sha256 else ""
        who = f"{self.student}: " if self.student else ""
        lines = [f"{who}{self.exercise}: {'PASS' if self.passed else 'FAIL'} "
                 f"{_num(self.points)}/{_num(self.max_points)} points",
                 f"  graded {self.submission or '(no submission)'}{digest}",
                 (f"  seed {self.seed} (pmpp grade --seed {self.seed} repeats this verdict); "
                  if self.seed is not None else "  ") + self.contained]
        lines += [f"  [{verdict}] {name}" + (": " + reason.strip().replace("\n", "\n      ") if reason else "")
                  for verdict, name, reason in _folded(self.checks)]
        if self.gpu_time_us is not None:
            ref = (f", reference solution {self.reference_time_us:.1f} us"
                   if self.reference_time_us else "")
            lines.append(f"  GPU time {self.gpu_time_us:.1f} us{ref}")
        if self.predicted_us is not None:
            ref = (f", reference solution {self.predicted_reference_us:.1f} us"
                   if self.predicted_reference_us else "")
            lines.append(f"  predicted {self.predicted_gpu} time {self.predicted_us:.1f} us, bound by "
                         f"{self.predicted_bound}{ref} (pmpp.predict, from the CPU engine's counts: not graded)")
        return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:g}"


def _verdict(check) -> str:
    return "not run" if not check.ran else "pass" if check.passed else "FAIL"


def _folded(checks):
    """(verdict, name, reason) lines: failures with the same reason at several sizes become one
    line that lists the sizes."""
    lines, index = [], {}
    for c in checks:
        template = c.name.replace(c.size, "{sizes}") if c.size else c.name
        key = (template, c.reason) if c.size and not c.passed else None
        if key in index:
            index[key][1].append(c.size)
            continue
        line = [c, [c.size], template]
        lines.append(line)
        if key:
            index[key] = line
    return [(_verdict(c), template.replace("{sizes}", ", ".join(sizes)) if c.size else c.name, c.reason)
            for c, sizes, template in lines]


# ----------------------------------------------------------------------------------------------
# The checks

@dataclass
class _Planned:
    kind: str                    # "compiles", "correct", "exact", "performance", "gpu", "gpu_time"
    name: str
    problem: dict | None = None
    size: str = ""
    criterion: object = None     # a performance check's exercises.Criterion or GpuTimeCriterion
    reference: Path | None = None   # gpu_time: the reference solution's file


def plan(exercise, seed: int = 0) -> list[_Planned]:
    """The checks an exercise is graded on, in order: the same list whatever the submission does.
    Besides the chapter's awkward sizes, one size drawn from ``seed`` (odd, between half the largest
    and the largest): a kernel written for the sizes it knows meets one it cannot know."""
    chapter = chapters.get(exercise.chapter)
    variant = chapter.variant(exercise.variant)
    checks = [_Planned("compiles", "compiles on the CPU engine")]
    for n in _sizes(chapter, seed):
        problem = problem_for(variant, {**chapter.problems["cpu"], **({} if n is None else {"n": n})})
        size = f"n={n}" if n is not None else chapter.describe(problem)
        checks.append(_Planned("correct", f"correct at {size} on random inputs (CPU engine: races "
                                          "in shared and global memory, bounds, barriers checked)",
                               problem, size))
        if chapter.make_exact_inputs is not None:
            checks.append(_Planned("exact", f"exact at {size} on inputs every correct order sums "
                                            "exactly", problem, size))
    problem = problem_for(variant, chapter.problems["cpu"])
    for criterion in exercise.performance:
        checks.append(_Planned("performance", f"performance: {criterion.metric} at most {criterion.at_most:g} at "
                               f"{chapter.describe(problem)} (CPU engine's count; {criterion.why})",
                               problem, criterion=criterion))
    problem = problem_for(variant, default_problem(chapter, "cupy"))    # run only where there is a GPU
    checks.append(_Planned("gpu", f"correct on the GPU at {chapter.describe(problem)}", problem))
    if exercise.gpu_time is not None:
        checks.append(_Planned("gpu_time", f"GPU time at most {exercise.gpu_time.within:g}x the reference "
                               f"solution's at {chapter.describe(problem)} (both timed in this run, in "
                               f"alternating rounds)", problem, criterion=exercise.gpu_time, reference=exercise.path))
    return checks


def _sizes(chapter, seed: int) -> tuple:
    """The chapter's test sizes (a chapter without any: its CPU problem, None), and a drawn one."""
    if not chapter.test_sizes:
        return (None,)
    largest = max(chapter.test_sizes)
    drawn = int(np.random.default_rng([seed, 1]).integers(largest // 2, largest)) | 1
    return tuple(chapter.test_sizes) + ((drawn,) if drawn not in chapter.test_sizes else ())


def grade(exercise: str, path=None, *, timeout: float = DEFAULT_TIMEOUT, seed: int | None = None,
          student: str | None = None, progress=None, missing: str | None = None, predict=None) -> GradeReport:
    """Grade a submission — ``path``, relative to the current folder (default: the exercise's
    own kernel file) — and return the report. ``progress(check)`` is called after each check.
    ``missing``: there is no submission, for this reason (every check fails with it).
    ``predict(chapter, variant, path, timeout)``: on a machine without a GPU, the predicted GPU time
    of a submission that passed, and of the reference solution, shown beside the verdict."""
    ex = find(exercise)
    if not path and not missing and os.environ.get(SUBMISSION_ENV):
        path, missing = find_submitted(Path(os.environ[SUBMISSION_ENV]), ex.path.name)
    submission = Path(path).expanduser().resolve() if path else ex.path
    seed = secrets.randbelow(2 ** 31) if seed is None else int(seed)
    report = GradeReport(ex.name, "" if missing else str(submission), student=student, seed=seed,
                         time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                         workbook=workbook_version(), contained=containment())
    chapter = chapters.get(ex.chapter)
    variant = chapter.variant(ex.variant)
    data, skip = None, missing
    if not missing:
        try:
            data = submission.read_bytes()
            report.sha256 = hashlib.sha256(data).hexdigest()
        except OSError as exc:
            skip = f"cannot read the submission {submission}: {exc.strerror or exc}"
    if data is not None and STUB_MARK.encode() in data:
        skip = _stub_left(data.decode(errors="replace"))
    with sandbox.sandboxed() as box:
        for index, planned in enumerate(plan(ex, seed)):
            points = float(ex.points.get(planned.kind, 1))
            wrong = planned.kind in ("performance", "gpu_time") and any(not c.passed for c in report.checks if c.ran)
            if skip or wrong:
                why = skip or "a kernel's speed counts only once it is right: fix the failed checks first"
                check = Check(planned.name, False, f"not run: {why}", 0.0, points, planned.size)
            elif planned.kind in ("gpu", "gpu_time") and not gpu_available():
                check = Check(planned.name, False, NO_GPU, 0.0, 0.0, planned.size, ran=False)
            else:
                check = _run(planned, points, chapter, variant, submission, timeout, [seed, index])
                skip = _why_stop(planned, check)
            report.checks.append(check)
            if progress:
                progress(check)
        if predict is not None and report.passed and not gpu_available():
            _predict_times(report, chapter, variant, submission, ex, timeout, predict)
    report.contained = str(box)
    if report.passed and gpu_available():
        _time_on_gpu(report, chapter, variant, submission, ex, seed)
    return report


NO_GPU = ("no GPU on this machine: not run, and it counts for nothing here; the points are the CPU "
          "engine's checks, the same on every machine")


# Set while a student's notebook is graded: the folder of that student's submission. An exercise
# graded from the notebook (``exercises.grade(name)``) is then the student's kernel file found in
# it, never the grader's own copy of the workbook's.
SUBMISSION_ENV = "PMPP_SUBMISSION"


def find_submitted(folder: Path, filename: str, any_name: bool = False) -> tuple[Path | None, str | None]:
    """(the one file named ``filename`` under ``folder``, None), or (None, why there is none).
    ``any_name``: the one file with ``filename``'s suffix will do when none has its name (a folder
    that holds one submission of one exercise)."""
    named = sorted(p for p in Path(folder).rglob(filename) if ".ipynb_checkpoints" not in p.parts)
    if len(named) == 1:
        return named[0], None
    suffix = Path(filename).suffix
    candidates = named or sorted(p for p in Path(folder).rglob(f"*{suffix}")
                                 if ".ipynb_checkpoints" not in p.parts)
    if len(candidates) == 1 and any_name:
        return candidates[0], None
    what = (f"{len(named)} files named {filename}" if named else
            f"no {filename}" + (f" and {len(candidates)} other {suffix} files" if candidates else
                                f" and no {suffix} file"))
    return None, f"no submission: {what} in {folder}"


def _stub_left(text: str) -> str:
    """Why a file that still holds a stub is not graded."""
    own, others = stubs_in(text)
    if own:
        return (f"not implemented yet: the line `// {STUB_MARK}` is still in the file; write the "
                "exercise's code in place of the stub and delete that line")
    return (f"not implemented yet: the file still holds the stub of part of {' and '.join(others)}'s "
            "answer, which this kernel builds on; put that exercise's answer (yours, or its released "
            "solution) in its place")


def _why_stop(planned, check) -> str | None:
    """After a failure that repeats at every size (no build, a hang), the remaining checks are
    not run, and say why."""
    if check.passed:
        return None
    if planned.kind == "compiles":
        return "the submission does not compile"
    if check.reason.startswith("did not finish"):
        return f"the kernel did not finish at {planned.size or 'the first size'}"
    return None


def _run(planned, points, chapter, variant, submission, timeout, seed) -> Check:
    """Run one check; pass, or fail with a reason — whatever goes wrong."""
    try:
        if planned.kind == "compiles":
            load_variant(chapter, variant, backend="cpu", check=True, path=submission, timeout=timeout)
        elif planned.kind == "performance":
            value = _count(chapter, variant, planned, submission, timeout, seed)
            return Check(planned.name, True, "", points, points, planned.size, measured=value)
        elif planned.kind == "gpu_time":
            if STUB_MARK in planned.reference.read_text():
                return Check(planned.name, False, "not run: this copy of the workbook has no reference solution "
                             "(a student release); the course's grader times it", 0.0, 0.0, planned.size, ran=False)
            mine = _gpu_time_against_reference(chapter, variant, planned, submission, seed)
            return Check(planned.name, True, "", points, points, planned.size, measured=mine)
        else:
            _verify(chapter, variant, planned, submission, timeout, seed)
        return Check(planned.name, True, "", points, points, planned.size)
    except CompileError as exc:
        reason = f"does not compile: {exc}"
    except KernelTimeoutError:
        reason = (f"did not finish within {timeout:g} s at {planned.size or 'this size'}: look for "
                  "a loop that never ends (a spin on a flag no thread sets); if the kernel is only "
                  "slow, give it longer with `pmpp grade --timeout SECONDS`")
    except SandboxViolation as exc:
        reason = f"refused: {exc}"
    except KernelCrashError as exc:
        reason = f"crashed: {exc}"
    except KernelCheckError as exc:
        reason = f"{type(exc).__name__}: {exc}"
    except _OverBound as exc:
        return Check(planned.name, False, str(exc), 0.0, points, planned.size, measured=exc.value)
    except AssertionError as exc:
        reason = str(exc)
    except ExerciseNotImplemented as exc:
        reason = str(exc)
    except (PmppError, TypeError, ValueError, KeyError, OSError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    return Check(planned.name, False, reason, 0.0, points, planned.size)


def _verify(chapter, variant, planned, submission, timeout, seed):
    if planned.kind == "gpu":
        result = verify(chapter, variant, planned.problem, backend="cupy", path=submission,
                        seed=seed, exact=chapter.make_exact_inputs is not None)
    else:
        result = verify(chapter, variant, planned.problem, backend="cpu",
                        check=planned.kind == "correct", path=submission, timeout=timeout,
                        seed=seed, exact=planned.kind == "exact")
    if not result.ok:
        raise AssertionError(f"wrong result: {result.detail or result.error}")


GPU_TIME_ROUNDS = 5     # alternating rounds of the submission and the reference solution
GPU_TIME_REPEATS = 6    # timed launches of each per round (after 2 warm-ups; L2 flushed before each)


def _gpu_time_against_reference(chapter, variant, planned, submission, seed) -> float:
    """A gpu_time check: the submission and the reference solution timed on the GPU in alternating
    rounds (a clock that drifts, or another process, slows both alike), compared by their medians;
    the submission's median in microseconds, or AssertionError past the criterion's factor."""
    import cupy

    inputs = chapter.make_inputs(planned.problem, cupy, np.random.default_rng(seed))
    runs = {}
    for who, path in (("submission", submission), ("reference", planned.reference)):
        module = load_variant(chapter, variant, backend="cupy", path=path)
        runs[who] = (lambda m: lambda: variant.launch(m, planned.problem, inputs))(module)
    medians = alternating_medians(runs)
    mine, reference = medians["submission"], medians["reference"]
    # the launch after the timed ones must still be right: a kernel that does its work only on its
    # first launches (a result kept between launches) is not timed doing nothing
    after = chapter.check(runs["submission"](), chapter.reference(planned.problem, inputs), planned.problem)
    if not after.ok:
        raise AssertionError(f"wrong after {GPU_TIME_ROUNDS * (GPU_TIME_REPEATS + 2)} timed launches, so its time "
                             f"counts for nothing: {after.detail or after.error}")
    within = planned.criterion.within
    if mine > within * reference:
        raise _OverBound(f"GPU time {mine:.1f} us, {mine / reference:.2f}x the reference solution's {reference:.1f} us "
                         f"(at most {within:g}x)", mine)
    return mine


def alternating_medians(runs: dict, rounds: int = GPU_TIME_ROUNDS, repeats: int = GPU_TIME_REPEATS) -> dict:
    """{name: median GPU time in us} of the launches ``runs`` ({name: a function that launches}),
    timed in ``rounds`` rounds that take each in turn, ``repeats`` timed launches each per round."""
    from ..timing import bench
    samples = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            samples[name] += bench(run, backend="cupy", warmup=2, repeat=repeats).samples_us
    return {name: float(np.median(times)) for name, times in samples.items()}


def _count(chapter, variant, planned, submission, timeout, seed):
    """A performance check: the submission run once on the CPU engine's count build, its counters
    summed over its launches, against the criterion; the line that does the most of it is named."""
    criterion = planned.criterion
    module = counting_module(load_variant(chapter, variant, backend="cpu", path=submission, timeout=timeout),
                             timeout=timeout)
    inputs = chapter.make_inputs(planned.problem, np, np.random.default_rng(seed))
    try:
        total = counted_run(module, lambda: variant.launch(module, planned.problem, inputs))
    except ValueError:
        raise AssertionError("the submission launched no kernel") from None
    value = total.metrics()[criterion.metric]
    if value > criterion.at_most:
        raise _OverBound(f"{criterion.metric} = {value:g}, more than {criterion.at_most:g}: {criterion.why}", value)
    return value


class _OverBound(AssertionError):
    """A performance check's counter past its bound: the message, and the value for the leaderboard."""
    def __init__(self, message: str, value: float):
        super().__init__(message)
        self.value = value


def _predict_times(report, chapter, variant, submission, ex, timeout, predict):
    """Without a GPU: the submission's predicted GPU time beside the reference solution's, from
    ``predict(chapter, variant, path, timeout)`` (pmpp.profiling.predict, which the command line
    passes in), at the chapter's GPU size; nothing where the model cannot count it. Shown, not graded."""
    try:
        mine = predict(chapter, variant, submission, timeout)
    except Exception:            # the checks passed at their sizes; a count that fails says nothing more
        return
    report.predicted_us, report.predicted_bound, report.predicted_gpu = mine.time_us, mine.bound, mine.gpu
    if STUB_MARK not in ex.path.read_text() and submission != ex.path.resolve():
        try:
            report.predicted_reference_us = predict(chapter, variant, ex.path, timeout).time_us
        except Exception:
            pass


def _time_on_gpu(report, chapter, variant, submission, ex, seed):
    """The submission's GPU time beside the reference solution's. A time below what the problem's
    bytes need at the GPU's peak bandwidth is a measurement error (a launch that did nothing,
    a timer misused), and fails the verdict."""
    import cupy

    from ..device import theoretical_peaks
    from ..results import device_info
    from ..timing import bench
    problem = problem_for(variant, default_problem(chapter, "cupy"))
    inputs = chapter.make_inputs(problem, cupy, np.random.default_rng(seed))

    def time_of(path):
        module = load_variant(chapter, variant, backend="cupy", path=path)
        return bench(lambda: variant.launch(module, problem, inputs), backend="cupy").median_us

    report.gpu_time_us = time_of(submission)
    report.gpu = device_info("cupy").get("name", "")
    if STUB_MARK not in ex.path.read_text() and submission != ex.path.resolve():
        report.reference_time_us = time_of(ex.path)
    peak_gbs, _ = theoretical_peaks(device_info("cupy"))
    verdict = plausible_time(report.gpu_time_us, variant.model(problem).bytes, peak_gbs)
    if verdict:
        report.checks.append(Check("GPU time is physically possible", False, verdict))


def plausible_time(time_us: float, model_bytes: float, peak_gbs: float | None) -> str:
    """"" if ``time_us`` can move ``model_bytes`` at ``peak_gbs``; else why it cannot."""
    if not peak_gbs or not model_bytes:
        return ""
    floor_us = model_bytes / (peak_gbs * 1e3)
    if time_us >= floor_us:
        return ""
    return (f"measurement error: {time_us:.2f} us is less than the {floor_us:.2f} us that moving "
            f"the problem's {model_bytes / 1e6:.1f} MB takes at the GPU's peak {peak_gbs:,.0f} GB/s")


# ----------------------------------------------------------------------------------------------
# Facts each verdict records

def workbook_version() -> str:
    """pmpp's version and the commit the workbook is at, where known."""
    from ..results import git_commit
    commit = git_commit()
    return f"pmpp {__version__}" + (f" ({commit})" if commit else "")


def containment() -> str:
    """How graded kernels are contained here, in the words a verdict prints."""
    ok, reason = sandbox.available()
    return "contained: " + reason if ok else "not contained: " + reason


# ----------------------------------------------------------------------------------------------
# The command

def grade_main(exercise: str, path, json_out=None, timeout=DEFAULT_TIMEOUT, seed=None,
               quiet=False, predict=None) -> int:
    """``pmpp grade EXERCISE [FILE]``: print the verdict (each check as it finishes, on standard
    error, unless ``quiet``), write JSON if asked; 0 if it passed."""
    import sys
    live = not quiet and sys.stderr.isatty()       # a terminal: one line that counts, then the verdict
    done = []

    def show(check):
        done.append(check.passed or not check.ran)
        if live:
            print(f"\r  grading: {len(done)} checks run, {done.count(False)} failed", end="", file=sys.stderr,
                  flush=True)

    report = grade(exercise, path, timeout=timeout, seed=seed, progress=show, predict=predict)
    if live:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(report)
    if json_out == "-":
        print(report.to_json())
    elif json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    return 0 if report.passed else 1

