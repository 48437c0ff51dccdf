"""DRAM traffic per variant, measured with Nsight Compute (``ncu``) on a GPU.

A model says which bytes a kernel *requests*; what reaches DRAM is what the L1 and L2 caches do
not catch. ``pmpp profile stencil`` launches each variant once under ``ncu`` (in a child process,
profiling only that launch) and records ``dram__bytes_read.sum`` and ``dram__bytes_write.sum``,
summed over the kernels the launch ran, in ``results/dram/<device>-<commit>.json``.

ncu runs every profiled kernel with cold caches (``--cache-control all``, its default), the GPU's
clocks left as they are: the bytes are what one launch moves from a flushed L2; ncu's durations are
not the benchmark's and are not kept.

``pmpp profile --stalls`` (:func:`pmpp.ncu.stall_profile`) runs the same child for Nsight Compute's
throughput, occupancy and warp-stall figures.
"""
from __future__ import annotations

import csv
import datetime as _dt
import functools
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import PmppError

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


class ProfilerError(PmppError):
    """Nsight Compute is missing, or a profiled run failed."""


def find_ncu() -> str:
    """The ``ncu`` executable: on PATH, else under $CUDA_PATH or /usr/local/cuda."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ncu").is_file():
            return str(Path(root) / "bin" / "ncu")
    raise ProfilerError("Nsight Compute (ncu) was not found: it comes with the CUDA toolkit; put its "
                        "bin folder on PATH or set CUDA_PATH. Without a GPU there is nothing to profile: "
                        "the notebooks show the recorded profile from results/dram/.")


def parse_csv(text: str) -> list[dict]:
    """ncu ``--csv`` output -> one dict per kernel launch: ``{"kernel": name, metric: bytes...}``,
    in launch order. Lines that are not CSV (ncu's ``==PROF==`` notes, the program's output) are
    skipped; values are converted to bytes whatever unit ncu chose."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") not in METRICS:
            continue
        unit = row.get("Metric Unit", "byte")
        if unit not in UNITS:
            raise ProfilerError(f"ncu reported {row['Metric Name']} in {unit!r}, not a unit of bytes")
        launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
        launch[row["Metric Name"]] = float(row["Metric Value"].replace(",", "")) * UNITS[unit]
    return list(launches.values())


def dram_traffic(chapter, problem: Mapping[str, Any], variants: Sequence[str] | None = None,
                 *, ncu: str | None = None, timeout: float = 300) -> list[dict]:
    """Profile one launch of each variant of ``chapter`` (all by default) on ``problem``; return
    ``[{"variant", "dram_read_bytes", "dram_write_bytes", "kernels": [names]}]``."""
    from .. import runner
    ncu = ncu or find_ncu()
    names = [chapter.variant(v).name for v in variants] if variants else [v.name for v in chapter.variants]
    rows = []
    for name in names:
        command = [ncu, "--csv", "--print-units", "base", "--profile-from-start", "off", "--clock-control", "none",
                   "--metrics", ",".join(METRICS), sys.executable, "-m", "pmpp.profiling.profile",
                   chapter.name, name, json.dumps(runner.problem_for(chapter.variant(name), problem))]
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        launches = parse_csv(run.stdout)
        if run.returncode != 0 or not launches:
            raise ProfilerError(f"profiling {chapter.name} {name} failed (exit {run.returncode}): "
                                f"{(run.stderr or run.stdout).strip()[-800:]}")
        rows.append({"variant": name,
                     "dram_read_bytes": sum(k.get(METRICS[0], 0.0) for k in launches),
                     "dram_write_bytes": sum(k.get(METRICS[1], 0.0) for k in launches),
                     "kernels": [k["kernel"] for k in launches]})
    return rows


@functools.lru_cache(maxsize=None)
def ncu_version(ncu: str | None = None) -> str | None:
    """The last line of ``ncu --version`` (asked once per executable), or None."""
    try:
        out = subprocess.run([ncu or find_ncu(), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError, ProfilerError):
        return None
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def recording_path(folder: str, device: Mapping[str, Any] | None = None, commit: str | None = None) -> Path:
    """``results/<folder>/<device-slug>-<commit>.json``, beside the benchmark recordings."""
    from .. import results
    bench_path = results.default_path(device, commit)
    return bench_path.parent / folder / bench_path.name


def default_path(device: Mapping[str, Any] | None = None, commit: str | None = None) -> Path:
    """``results/dram/<device-slug>-<commit>.json``."""
    return recording_path("dram", device, commit)


def add_to_recording(path, folder: str, section: str, key: str, entry: Mapping[str, Any], check, *,
                     device: Mapping[str, Any] | None = None, software: Mapping[str, Any] | None = None,
                     commit: str | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """Put ``entry`` under ``data[section][key]`` of a profiler recording (what else it holds is
    kept; one file holds one device and one commit), checked with ``check(data, path)``.
    ``device``, ``software`` (versions) and ``commit`` default to this GPU's, and HEAD."""
    from .. import results
    device = dict(results.device_info("cupy") if device is None else device)
    commit = commit if commit is not None else (results.git_commit() or "unknown")
    path = Path(path) if path is not None else recording_path(folder, device, commit)
    entries = {}
    if path.exists():
        old = json.loads(path.read_text())
        check(old, path)
        results.ensure_same_run(path, old, device, commit)
        entries = old[section]
    entries[key] = dict(entry)
    software = {**results.versions("cupy"), "ncu": ncu_version()} if software is None else dict(software)
    data = {"device": device, "versions": software,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit, **(extra or {}), section: dict(sorted(entries.items()))}
    check(data, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def write_profile(path: str | os.PathLike | None, chapter: str, problem: Mapping[str, Any],
                  rows: Sequence[Mapping[str, Any]], *, device: Mapping[str, Any] | None = None,
                  software: Mapping[str, Any] | None = None, commit: str | None = None) -> Path:
    """Add one chapter's profile to a DRAM-traffic file (other chapters in it are kept)."""
    entry = {"problem": dict(problem), "variants": [dict(r) for r in rows]}
    return add_to_recording(path, "dram", "chapters", chapter, entry, validate, device=device, software=software,
                            commit=commit, extra={"metrics": list(METRICS)})


def validate(data: Any, where: Any = "<profile>") -> None:
    """Raise ValueError unless ``data`` is a complete DRAM-traffic recording."""
    def bad(why):
        raise ValueError(f"{where}: {why}")
    if not isinstance(data, dict):
        bad("not a JSON object")
    for key in ("device", "versions", "date", "commit", "metrics", "chapters"):
        if key not in data:
            bad(f"missing {key!r}")
    if not data["device"].get("name"):
        bad("device has no name")
    for chapter, profile in data["chapters"].items():
        if not profile.get("variants"):
            bad(f"chapter {chapter!r} has no variants")
        for row in profile["variants"]:
            for key in ("dram_read_bytes", "dram_write_bytes"):
                if not isinstance(row.get(key), (int, float)) or row[key] < 0:
                    bad(f"{chapter} {row.get('variant')}: {key} must be a number >= 0")
            if not row.get("kernels"):
                bad(f"{chapter} {row.get('variant')}: no kernel was profiled")


def recordings_with(folder: str, section: str, key: str, check, directory=None) -> list[dict]:
    """Every committed recording in ``results/<folder>/`` (or ``directory``) whose ``section`` has
    ``key``, each checked with ``check(data, path)``, newest first."""
    from .. import results
    directory = Path(directory) if directory is not None else results.RESULTS_DIR / folder
    found = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        check(data, path)
        if key in data[section]:
            found.append(data)
    return sorted(found, key=lambda d: d["date"], reverse=True)


def recorded(chapter: str, directory: str | os.PathLike | None = None) -> list[dict]:
    """Every committed DRAM-traffic recording that has ``chapter``, newest first."""
    return recordings_with("dram", "chapters", chapter, validate, directory)


def library_named(chapter, name: str):
    """The chapter's library routine called ``name``, or None."""
    return next((lib for lib in chapter.library if lib.name == name), None)


def _launch_once(chapter_name: str, name: str, problem_json: str) -> None:
    """The child ncu runs: compile and warm up, then launch once between profiler start and stop.
    ``name``: a variant, or one of the chapter's library routines."""
    import cupy
    import cupyx.profiler
    import numpy as np
    from .. import chapters, runner
    chapter = chapters.get(chapter_name)
    problem = json.loads(problem_json)
    inputs = chapter.make_inputs(problem, cupy, np.random.default_rng())
    library = library_named(chapter, name)
    if library is not None:
        def launch():
            return library.run(problem, inputs)
    else:
        variant = chapter.variant(name)
        module = runner.load_variant(chapter, variant, backend="cupy")

        def launch():
            return variant.launch(module, problem, inputs)
    launch()
    cupy.cuda.Device().synchronize()
    with cupyx.profiler.profile():
        launch()
        cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    _launch_once(*sys.argv[1:])
