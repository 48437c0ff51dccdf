"""Deadlines and a late policy, declared in ``kernels/exercises.toml`` and applied by the gradebook::

    [deadlines]                     # an exercise or a notebook -> when it is due, with its UTC offset
    "reduction/05_coarsened" = 2026-12-04T23:59:00-08:00
    "10_reduction" = 2026-12-11T23:59:00-08:00

    [late]
    penalty_per_day = 0.1           # share of the item's points taken off per day late, or part of one
    days_accepted = 3               # later than this many days: no points

When a submission was made comes from ``pmpp gradebook --submitted-at times.csv`` (columns
student, item, submitted_at in ISO 8601, as a learning platform exports them), else from the
submitted file's modification time, which copying a folder can change: the gradebook says which.
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

DAY = _dt.timedelta(days=1)


@dataclass(frozen=True)
class LatePolicy:
    deadlines: Mapping[str, _dt.datetime] = field(default_factory=dict)
    penalty_per_day: float = 0.0
    days_accepted: int | None = None     # None: accepted however late

    def days_late(self, item: str, submitted: _dt.datetime | None) -> int:
        """Whole days, or parts of one, that ``submitted`` is past ``item``'s deadline (0 for none)."""
        due = self.deadlines.get(item)
        if due is None or submitted is None or submitted <= due:
            return 0
        return math.ceil((submitted - due) / DAY)

    def share_kept(self, days_late: int) -> float:
        """The share of the points a submission ``days_late`` days late keeps."""
        if days_late <= 0:
            return 1.0
        if self.days_accepted is not None and days_late > self.days_accepted:
            return 0.0
        return max(0.0, 1.0 - self.penalty_per_day * days_late)


def late_policy(manifest: Mapping) -> LatePolicy:
    """The policy of a parsed ``exercises.toml`` (none declared: no deadlines, nothing taken off)."""
    deadlines = {}
    for item, due in manifest.get("deadlines", {}).items():
        if not isinstance(due, _dt.datetime) or due.tzinfo is None:
            raise ValueError(f"exercises.toml: the deadline of {item!r} is {due!r}; write a date and time with "
                             f"its UTC offset, unquoted, e.g. \"{item}\" = 2026-12-04T23:59:00-08:00")
        deadlines[item] = due
    late = manifest.get("late", {})
    unknown = sorted(set(late) - {"penalty_per_day", "days_accepted"})
    if unknown:
        raise ValueError(f"exercises.toml: [late] has {', '.join(unknown)}; it takes penalty_per_day and days_accepted")
    penalty = late.get("penalty_per_day", 0.0)
    if not isinstance(penalty, (int, float)) or not 0 <= penalty <= 1:
        raise ValueError(f"exercises.toml: [late] penalty_per_day is {penalty!r}; give a share between 0 and 1 "
                         "(0.1: a tenth of the points per day late)")
    days = late.get("days_accepted")
    if days is not None and (not isinstance(days, int) or days < 0):
        raise ValueError(f"exercises.toml: [late] days_accepted is {days!r}; give a whole number of days, or leave it out")
    return LatePolicy(deadlines, float(penalty), days)


def read_submission_times(path) -> dict[tuple[str, str], _dt.datetime]:
    """``{(student, item): when}`` from a CSV with columns student, item, submitted_at (ISO 8601,
    with its UTC offset)."""
    times = {}
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        missing = {"student", "item", "submitted_at"} - set(rows.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: needs the columns student, item and submitted_at; it lacks {', '.join(sorted(missing))}")
        for number, row in enumerate(rows, start=2):
            try:
                when = _dt.datetime.fromisoformat(row["submitted_at"].strip())
            except ValueError:
                when = None
            if when is None or when.tzinfo is None:
                raise ValueError(f"{path}:{number}: submitted_at {row['submitted_at']!r} is not an ISO 8601 time "
                                 "with its UTC offset (e.g. 2026-12-05T08:30:00+00:00)")
            times[(row["student"], row["item"])] = when
    return times


def file_time(path) -> _dt.datetime | None:
    """When a submitted file was last changed (UTC), or None where there is no file."""
    try:
        return _dt.datetime.fromtimestamp(Path(path).stat().st_mtime, _dt.timezone.utc)
    except (OSError, TypeError, ValueError):
        return None
