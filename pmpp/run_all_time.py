"""How long ``pmpp run all`` takes, start-up included, recorded with the device it ran on.

    python -m pmpp.run_all_time                      # two runs; writes results/run_all/<device>-<commit>.json
    python -m pmpp.run_all_time --runs 3 --out t.json -- --torch     # arguments after -- go to pmpp run

Each run is a fresh ``python -m pmpp.cli run all`` process, timed from its start to its exit (the
interpreter, imports, CUDA context, compiles or compile-cache reads, checks and timings). The
first run may compile every kernel (CuPy caches them on disk, ``CUPY_CACHE_DIR``); the others
show the time a student sees on a second run. A benchmark, not a test: it records, it does not
judge.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

from .results import RESULTS_DIR, device_info, device_slug, git_commit, versions


def time_run(extra: list[str]) -> dict:
    """One ``pmpp run all``: wall seconds, exit status, and the last lines it printed."""
    command = [sys.executable, "-m", "pmpp.cli", "run", "all", *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return {"command": " ".join(["pmpp", "run", "all", *extra]), "wall_s": round(seconds, 2),
            "exit_status": done.returncode, "tail": (done.stdout + done.stderr).strip().splitlines()[-3:]}


def record(runs: list[dict], device: dict, commit: str) -> dict:
    return {"device": device, "versions": versions(), "commit": commit,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "runs": runs, "best_wall_s": min(r["wall_s"] for r in runs)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pmpp.run_all_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of pmpp run all (default 2)")
    parser.add_argument("--out", help="JSON file (default: results/run_all/<device>-<commit>.json)")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    runs = []
    for i in range(max(1, args.runs)):
        runs.append(time_run(extra))
        print(f"run {i + 1}: {runs[-1]['wall_s']:.1f} s, exit status {runs[-1]['exit_status']}", flush=True)
    device, commit = device_info(), git_commit() or "unknown"
    out = Path(args.out) if args.out else (
        RESULTS_DIR / "run_all" / f"{device_slug(device['name'])}-{commit.split('-')[0][:7]}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record(runs, device, commit), indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if all(r["exit_status"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
