"""Solution markers: where a kernel file or a notebook cell holds an exercise's answer.

A kernel file marks its exercise's solution as nbgrader does::

    // BEGIN SOLUTION
    ...the instructor's code...
    // END SOLUTION

Any other kernel file that repeats part of an exercise's answer (a later variant built on it)
marks that part with the exercise's name, so that the release stubs it there too::

    // BEGIN SOLUTION reduction/14_warp_shuffle
    ...
    // END SOLUTION reduction/14_warp_shuffle

Notebook code cells use ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and hide tests between
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``.

A line that looks like a marker but is not exactly one (``// END SOLUTON``, ``//BEGIN SOLUTION``,
``// begin solution``) is an error, as are unmatched and nested markers: a misspelt marker would
otherwise release the solution it was meant to hide.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


STUB_MARK = "pmpp: not implemented yet"   # a stub's line: what a release leaves to write

_KERNEL_MARKER = re.compile(r"[ \t]*// (?P<kind>BEGIN|END) SOLUTION(?: (?P<name>[\w.-]+/[\w.-]+))?[ \t\r]*")
_CELL_MARKERS = {"### BEGIN SOLUTION": ("BEGIN", "SOLUTION"), "### END SOLUTION": ("END", "SOLUTION"),
                 "### BEGIN HIDDEN TESTS": ("BEGIN", "HIDDEN TESTS"),
                 "### END HIDDEN TESTS": ("END", "HIDDEN TESTS")}
# A comment whose first word is BEGIN or END, in any case or spacing, followed by a word.
_MARKER_LIKE = re.compile(r"(?i)(?://+|/\*|#+)[ \t]*(?:begin|end)[ \t_-]*([a-z]+)")
_MARKER_WORDS = ("SOLUTION", "HIDDEN")


class MarkerError(ValueError):
    """Malformed or unmatched solution markers; the message lists each, by file and line."""


@dataclass(frozen=True)
class Region:
    """One marked solution: lines ``begin``..``end`` (1-based, the marker lines included)."""
    where: str          # "kernels/reduction/05_coarsened.cu", or "notebooks/10_reduction.ipynb, cell 31"
    exercise: str       # the exercise whose answer it is
    begin: int
    end: int
    body: tuple[str, ...]


def looks_like_marker(line: str) -> bool:
    match = _MARKER_LIKE.search(line)
    if not match:
        return False
    word = match.group(1).upper()
    return word.startswith(("SOL", "HID")) or any(
        difflib.SequenceMatcher(None, word, marker).ratio() >= 0.7 for marker in _MARKER_WORDS)


# ----------------------------------------------------------------------------------------------
# Kernel files

def kernel_regions(text: str, where: str, own: str | None, known) -> tuple[list[Region], list[str]]:
    """The solution regions of a kernel file and the problems with its markers.

    ``own``: the exercise the file is (None for a variant that is not one); ``known``: every
    exercise's name. An unnamed region is ``own``'s answer; a named one, the named exercise's."""
    lines = text.split("\n")
    regions, problems, open_at = [], [], None
    for number, line in enumerate(lines, 1):
        marker = _KERNEL_MARKER.fullmatch(line)
        if marker is None:
            if looks_like_marker(line):
                problems.append(f"{where}:{number}: {line.strip()!r} looks like a solution marker but "
                                "is not one; write `// BEGIN SOLUTION` or `// END SOLUTION` alone on "
                                "the line (optionally followed by the exercise, e.g. reduction/14_warp_shuffle)")
            continue
        name = marker.group("name")
        if marker.group("kind") == "BEGIN":
            if open_at is not None:
                problems.append(f"{where}:{number}: BEGIN SOLUTION inside the region opened on line "
                                f"{open_at[0]}; close that one first with `// END SOLUTION`")
                continue
            exercise = _region_exercise(name, own, known, f"{where}:{number}", problems)
            open_at = (number, exercise)
            continue
        if open_at is None:
            problems.append(f"{where}:{number}: END SOLUTION without a BEGIN SOLUTION before it")
            continue
        begin, exercise = open_at
        if name is not None and name != exercise:
            problems.append(f"{where}:{number}: END SOLUTION {name} closes the region of "
                            f"{exercise} opened on line {begin}")
        regions.append(Region(where, exercise, begin, number, tuple(lines[begin:number - 1])))
        open_at = None
    if open_at is not None:
        problems.append(f"{where}:{open_at[0]}: BEGIN SOLUTION is never closed; add `// END SOLUTION`")
    if own is not None and not problems and not any(r.exercise == own for r in regions):
        problems.append(f"{where}: exercise {own} (kernels/exercises.toml) has no solution region; mark "
                        "its answer with `// BEGIN SOLUTION` ... `// END SOLUTION`")
    return regions, problems


def _region_exercise(name, own, known, where, problems) -> str:
    if name is None:
        if own is None:
            problems.append(f"{where}: this file is not an exercise, so its solution region must "
                            "name the exercise it belongs to: `// BEGIN SOLUTION chapter/NN_name`")
        return own or "?"
    if name not in known:
        problems.append(f"{where}: no exercise {name!r} in kernels/exercises.toml")
    return name


def stub_kernel(text: str, regions: list[Region], own: str | None, keep=()) -> str:
    """``text`` with each region replaced by a stub that compiles and does nothing, except the
    regions of the exercises in ``keep`` (solutions released), whose markers alone go."""
    lines = text.split("\n")
    first = {}
    for region in sorted(regions, key=lambda r: r.begin):
        first.setdefault(region.exercise, region)
    for region in sorted(regions, key=lambda r: r.begin, reverse=True):
        pad = re.match(r"[ \t]*", lines[region.begin - 1]).group()
        if region.exercise in keep:
            replacement = list(region.body)
        elif region.exercise == own:
            replacement = _own_stub(pad, region.exercise)
        else:
            replacement = _shared_stub(pad, region.exercise, again=first[region.exercise] is not region)
        lines[region.begin - 1:region.end] = replacement
    return "\n".join(lines)


def _own_stub(pad: str, exercise: str) -> list[str]:
    return [f"{pad}// EXERCISE {exercise}: write this part. Until you do, grading says",
            f"{pad}// \"not implemented yet\". Check your work with: pmpp grade {exercise}",
            f"{pad}// {STUB_MARK}"]


def _shared_stub(pad: str, exercise: str, again: bool) -> list[str]:
    mark = f"{pad}// {STUB_MARK} (part of exercise {exercise})"
    if again:
        return [f"{pad}// More of exercise {exercise}'s answer, as above.", mark]
    return [f"{pad}// This part is exercise {exercise}'s answer: it is released with that",
            f"{pad}// exercise's solution (or put your own answer here). Until then this variant is skipped.",
            mark]


# ----------------------------------------------------------------------------------------------
# Notebook cells

def cell_regions(source: str, where: str) -> tuple[list[Region], list[str]]:
    """The solution regions of a notebook code cell (hidden tests are not solutions) and the
    problems with its markers."""
    lines = source.split("\n")
    regions, problems, open_at = [], [], None
    for number, line in enumerate(lines, 1):
        marker = _CELL_MARKERS.get(line.strip())
        if marker is None:
            if looks_like_marker(line):
                problems.append(f"{where}, line {number}: {line.strip()!r} looks like a marker but is "
                                f"not one; write exactly one of {', '.join(_CELL_MARKERS)}")
            continue
        kind, what = marker
        if kind == "BEGIN":
            if open_at is not None:
                problems.append(f"{where}, line {number}: {line.strip()} inside the {open_at[1]} "
                                f"region opened on line {open_at[0]}")
            else:
                open_at = (number, what)
            continue
        if open_at is None or open_at[1] != what:
            problems.append(f"{where}, line {number}: {line.strip()} without a matching "
                            f"### BEGIN {what} before it")
            continue
        if what == "SOLUTION":
            regions.append(Region(where, where, open_at[0], number, tuple(lines[open_at[0]:number - 1])))
        open_at = None
    if open_at is not None:
        problems.append(f"{where}, line {open_at[0]}: ### BEGIN {open_at[1]} is never closed; add "
                        f"### END {open_at[1]}")
    return regions, problems


_CELL_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*(\n|$)",
                            re.MULTILINE | re.DOTALL)
_CELL_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*(\n|$)",
                          re.MULTILINE | re.DOTALL)


def stub_cell(source: str) -> str:
    """nbgrader's convention: solutions become ``raise NotImplementedError()``; hidden tests go.
    (The cell's markers are checked first, by :func:`cell_regions`.)"""
    source = _CELL_HIDDEN.sub("", source)
    return _CELL_SOLUTION.sub(lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()\n",
                              source).rstrip("\n")


def stubs_in(text: str) -> tuple[bool, list[str]]:
    """Whether a kernel file's text holds its own exercise's stub, and the exercises whose answers
    it holds stubs of (what :func:`_shared_stub` writes)."""
    others = re.findall(re.escape(STUB_MARK) + r" \(part of exercise ([\w./-]+)\)", text)
    own = re.search(re.escape(STUB_MARK) + r"[ \t]*$", text, re.MULTILINE) is not None
    return own, list(dict.fromkeys(others))
