"""Deadlines and the late policy of exercises.toml, as the gradebook applies them."""
import csv
import datetime as dt
import os
from types import SimpleNamespace

import pytest

from pmpp.course import classroom
from pmpp.course.deadlines import LatePolicy, late_policy, read_submission_times
from pmpp.exercises import tomllib

MANIFEST = tomllib.loads('''
[deadlines]
"reduction/05_coarsened" = 2026-12-04T23:59:00-08:00

[late]
penalty_per_day = 0.25
days_accepted = 2
''')
DUE = dt.datetime(2026, 12, 5, 7, 59, tzinfo=dt.timezone.utc)   # the deadline above, in UTC


def test_each_day_or_part_of_one_late_takes_its_share_and_past_the_last_day_nothing_counts():
    policy = late_policy(MANIFEST)
    assert policy.deadlines["reduction/05_coarsened"] == DUE
    late = [policy.days_late("reduction/05_coarsened", DUE + delta)
            for delta in (dt.timedelta(0), dt.timedelta(seconds=1), dt.timedelta(hours=24), dt.timedelta(hours=25),
                          dt.timedelta(days=3))]
    assert late == [0, 1, 1, 2, 3]
    assert [policy.share_kept(d) for d in late] == [1.0, 0.75, 0.75, 0.5, 0.0]
    assert policy.days_late("reduction/14_warp_shuffle", DUE + dt.timedelta(days=9)) == 0   # no deadline


@pytest.mark.parametrize("text, says", [
    ('[deadlines]\n"reduction/05_coarsened" = 2026-12-04T23:59:00\n', "UTC offset"),
    ('[deadlines]\n"reduction/05_coarsened" = "Friday"\n', "UTC offset"),
    ('[late]\npenalty_per_day = 10\n', "between 0 and 1"),
    ('[late]\ndays_accepted = -1\n', "whole number"),
    ('[late]\npenalty = 0.1\n', "penalty_per_day and days_accepted"),
])
def test_a_policy_that_cannot_be_applied_says_how_to_write_it(text, says):
    with pytest.raises(ValueError, match=says):
        late_policy(tomllib.loads(text))


def test_without_a_policy_nothing_is_late():
    policy = late_policy({})
    assert policy == LatePolicy() and policy.share_kept(policy.days_late("x", DUE)) == 1.0


def test_submission_times_must_say_their_utc_offset(tmp_path):
    good = tmp_path / "times.csv"
    good.write_text("student,item,submitted_at\nann,reduction/05_coarsened,2026-12-05T09:00:00+00:00\n")
    assert read_submission_times(good) == {("ann", "reduction/05_coarsened"): dt.datetime(2026, 12, 5, 9, tzinfo=dt.timezone.utc)}
    bad = tmp_path / "bad.csv"
    bad.write_text("student,item,submitted_at\nann,reduction/05_coarsened,5 Dec 2026\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: .*ISO 8601"):
        read_submission_times(bad)
    (tmp_path / "cols.csv").write_text("name,when\n")
    with pytest.raises(ValueError, match="student, item and submitted_at"):
        read_submission_times(tmp_path / "cols.csv")


def report(points, path):
    return SimpleNamespace(points=points, max_points=10.0, submission=str(path))


def test_the_gradebook_takes_the_late_share_off_and_gives_the_days(tmp_path):
    items = ["reduction/05_coarsened", "reduction/14_warp_shuffle"]
    files = {}
    for student, when in (("ann", DUE - dt.timedelta(hours=1)), ("ben", DUE + dt.timedelta(hours=30)),
                          ("cat", DUE + dt.timedelta(days=5))):
        files[student] = tmp_path / f"{student}.cu"
        files[student].write_text("//")
        os.utime(files[student], (when.timestamp(), when.timestamp()))   # the file's time, when no CSV says
    book = {s: {items[0]: report(8.0, f), items[1]: report(6.0, f)} for s, f in files.items()}
    out = tmp_path / "book.csv"
    classroom.write_gradebook(book, items, out, late_policy(MANIFEST))
    rows = {r["student"]: r for r in csv.DictReader(open(out))}
    assert [rows[s][items[0]] for s in files] == ["8", "4", "0"]          # on time; 2 days: half; 5: none
    assert [rows[s]["reduction/05_coarsened days late"] for s in files] == ["0", "2", "5"]
    assert [rows[s]["total"] for s in files] == ["14", "10", "6"]        # 14_warp_shuffle has no deadline
    assert "reduction/14_warp_shuffle days late" not in rows["ann"]

    times = {("cat", items[0]): DUE}                                      # the platform's time wins
    classroom.write_gradebook(book, items, out, late_policy(MANIFEST), times)
    assert {r["student"]: r for r in csv.DictReader(open(out))}["cat"][items[0]] == "8"
