"""A class leaderboard: the submissions of one exercise that passed, best first, with the numbers
behind the order - the GPU time where a GPU timed them (a table per GPU model), and on any machine
the CPU engine's counts behind the exercise's performance criteria (fewer is better: a count of
loads, atomics or shared-memory accesses cannot be gamed by a timer). As a CSV and a static HTML page."""
from __future__ import annotations

import csv
import html
import math
from pathlib import Path
from typing import Sequence

from ..exercises import find


def rows(reports: Sequence) -> list[dict]:
    """One row per report (a :class:`~pmpp.course.grading.GradeReport`), ranked: the ones that
    passed first; among them the fastest on the GPU, then the lowest counts, criterion by criterion."""
    table = []
    for report in reports:
        criteria = find(report.exercise).performance
        measured = [c.measured for c in report.checks if c.name.startswith("performance:")]
        row = {"student": report.student or Path(report.submission).stem, "passed": report.passed,
               "points": report.points, "total": report.max_points, "gpu": report.gpu,
               "gpu_time_us": report.gpu_time_us}
        row.update({c.metric: value for c, value in zip(criteria, measured)})
        table.append(row)
    metrics = [c.metric for c in find(reports[0].exercise).performance] if reports else []

    def key(row):
        counts = tuple(math.inf if row.get(m) is None else row[m] for m in metrics)
        time = math.inf if row["gpu_time_us"] is None else row["gpu_time_us"]
        return (not row["passed"], row["gpu"] or "~", time, counts, row["student"])

    table.sort(key=key)
    for rank, row in enumerate(table, 1):
        row["rank"] = rank if row["passed"] else ""
    return table


def write(reports: Sequence, folder) -> tuple[Path, Path]:
    """``folder``/leaderboard.csv and leaderboard.html for ``reports`` (one exercise's)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table = rows(reports)
    exercise = reports[0].exercise if reports else ""
    metrics = [c.metric for c in find(exercise).performance] if reports else []
    fields = ["rank", "student", "passed", "points", "total", "gpu", "gpu_time_us", *metrics]
    csv_path = folder / "leaderboard.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in table:
            writer.writerow({k: _text(row.get(k)) for k in fields})
    html_path = folder / "leaderboard.html"
    html_path.write_text(_page(exercise, fields, table))
    return csv_path, html_path


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}" if not value.is_integer() else f"{value:g}"
    return str(value)


def _page(exercise: str, fields: Sequence[str], table: Sequence[dict]) -> str:
    head = "".join(f"<th>{html.escape(f)}</th>" for f in fields)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(_text(row.get(f)))}</td>" for f in fields) + "</tr>"
                     for row in table)
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(exercise)} leaderboard</title>\n"
            "<style>table{border-collapse:collapse;font-family:sans-serif}td,th{border:1px solid #999;"
            "padding:4px 8px;text-align:right}</style></head><body>\n"
            f"<h1>{html.escape(exercise)}</h1>\n<p>The submissions that passed, best first: the GPU time "
            "where a GPU timed them, then the CPU engine's counts of the exercise's performance criteria "
            "(fewer is better).</p>\n"
            f"<table>\n<tr>{head}</tr>\n{body}\n</table>\n</body></html>\n")
