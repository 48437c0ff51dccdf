"""python -m pmpp.run_all_time: the wall time of `pmpp run all`, recorded with its device."""
import json

from pmpp import run_all_time


def test_time_run_times_a_real_subprocess_and_keeps_its_exit_status():
    run = run_all_time.time_run(["--definitely-not-an-option"])
    assert run["command"] == "pmpp run all --definitely-not-an-option"
    assert run["exit_status"] == 2 and run["wall_s"] > 0
    assert any("--definitely-not-an-option" in line for line in run["tail"])


def test_the_record_names_device_versions_commit_and_best_run(tmp_path, monkeypatch):
    walls = iter([7.5, 3.25])
    monkeypatch.setattr(run_all_time, "time_run", lambda extra: {
        "command": "pmpp run all", "wall_s": next(walls), "exit_status": 0, "tail": []})
    out = tmp_path / "t.json"
    assert run_all_time.main(["--runs", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [r["wall_s"] for r in record["runs"]] == [7.5, 3.25] and record["best_wall_s"] == 3.25
    assert record["device"]["name"] and record["versions"]["python"] and record["commit"]


def test_a_failed_run_fails_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(run_all_time, "time_run", lambda extra: {
        "command": "pmpp run all", "wall_s": 1.0, "exit_status": 1, "tail": ["1 variant failed"]})
    assert run_all_time.main(["--runs", "1", "--out", str(tmp_path / "t.json")]) == 1
