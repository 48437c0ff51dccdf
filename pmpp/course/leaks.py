"""The leak check: no released file may hold an exercise's solution.

Lines are compared normalized: comments, whitespace and braces removed. A solution line counts
only if it is *significant*: at least :data:`SHORTEST` characters once normalized, not a
preprocessor line, not a bare barrier or fence (``}``, ``return;``, ``__syncthreads();`` give
nothing away), and not *public*: a line the student is given anyway (:mod:`pmpp.course.release` says
which: the code around the exercise's stub, the variants before it). A released file leaks an
exercise if it holds

* :data:`RUN` consecutive significant lines of one of the exercise's marked regions (the whole
  region, if it has fewer), or
* at least :data:`FRACTION` of the exercise's significant lines (two at the least), wherever
  they are.

It compares text, so it finds a solution copied, re-indented or re-commented, not one rewritten.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass

from ..markers import Region

RUN = 3
FRACTION = 0.5
SHORTEST = 12
_BARE = {"__syncthreads();", "__syncwarp();", "__threadfence();", "__threadfence_block();",
         "raiseNotImplementedError()"}
# A solution's language decides what a comment is: in Python `//` divides.
_COMMENTS = {"cuda": re.compile(r"//.*|/\*.*?\*/"), "python": re.compile(r"#.*")}
_SPACE_AND_BRACES = re.compile(r"[\s{}]+")


def normalize(line: str, language: str = "cuda") -> str:
    """A line without comments, whitespace or braces (wherever the braces were put)."""
    return _SPACE_AND_BRACES.sub("", _COMMENTS[language].sub("", line))


def significant(normalized: str) -> bool:
    return len(normalized) >= SHORTEST and not normalized.startswith("#") and normalized not in _BARE


@dataclass(frozen=True)
class Leak:
    file: str
    exercise: str
    lines: tuple[str, ...]      # the solution's lines found there, as the instructor wrote them

    def __str__(self):
        shown = "\n".join(f"    {line.strip()}" for line in self.lines[:6])
        more = f"\n    ... ({len(self.lines)} lines in all)" if len(self.lines) > 6 else ""
        return f"{self.file} holds exercise {self.exercise}'s solution:\n{shown}{more}"


class Solution:
    """One exercise's marked regions, as significant normalized lines (``public``: normalized
    lines that do not count)."""

    def __init__(self, exercise: str, regions: list[Region], public: set[str] = frozenset(),
                 language: str = "cuda"):
        self.exercise = exercise
        self.language = language
        kept = ([(n, line) for line in region.body
                 if significant(n := normalize(line, language)) and n not in public]
                for region in regions)
        self.regions = [region for region in kept if region]
        self.lines = {n: line for region in self.regions for n, line in region}

    def leak_in(self, file_lines: list[str]) -> tuple[str, ...]:
        """The solution lines ``file_lines`` (normalized, significant only) give away; empty if none."""
        present = set(file_lines)
        found = [n for n in self.lines if n in present]
        if self.lines and len(found) >= max(2, FRACTION * len(self.lines)):
            return tuple(self.lines[n] for n in found)
        for region in self.regions:
            run = _longest_run([n for n, _ in region], file_lines)
            if run and len(run) >= min(RUN, len(region)):
                return tuple(self.lines[n] for n in run)
        return ()


def _longest_run(wanted: list[str], lines: list[str]) -> list[str]:
    """The longest run of consecutive ``wanted`` lines that ``lines`` holds consecutively."""
    positions = defaultdict(list)
    for i, line in enumerate(wanted):
        positions[line].append(i)
    best_end = best_length = 0
    previous: dict[int, int] = {}
    for line in lines:
        current = {i: previous.get(i - 1, 0) + 1 for i in positions.get(line, ())}
        for i, length in current.items():
            if length > best_length:
                best_end, best_length = i + 1, length
        previous = current
    return wanted[best_end - best_length:best_end]


def text_lines(path: str, text: str, language: str = "cuda") -> list[str]:
    """A released file's significant lines, normalized as ``language``; a notebook's are its
    cells' sources."""
    if path.endswith(".ipynb"):
        cells = json.loads(text).get("cells", [])
        text = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in cells)
    return [n for n in (normalize(line, language) for line in text.split("\n")) if significant(n)]


def find_leaks(files: dict[str, str], solutions: list[Solution]) -> list[Leak]:
    """Every (file, exercise) where a released text file (path -> text) holds a solution."""
    leaks = []
    for path, text in sorted(files.items()):
        lines = {language: text_lines(path, text, language) for language in _COMMENTS}
        for solution in solutions:
            found = solution.leak_in(lines[solution.language])
            if found:
                leaks.append(Leak(path, solution.exercise, found))
    return leaks
