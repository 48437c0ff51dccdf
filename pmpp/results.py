"""Results files: the numbers a GPU run recorded, committed so that readers without a GPU see them.

One file per device and commit, ``results/<device-slug>-<commit>.json`` (a file's date, commit and
device speak for every number in it, so a run at another commit goes to another file)::

    {"device":   {"name", "compute_capability", "sm_count", "l2_bytes", "memory_bytes", ...},
     "versions": {"driver", "cuda_runtime", "cupy", "numpy", "python", "torch"},
     "date":     "2026-11-21T15:02:11+00:00",
     "commit":   "abc1234...(-dirty)",
     "clock":    "cuda events",
     "ceilings": {"copy_gbs", "fp32_gflops", ...},
     "chapters": {"reduction": [entry, ...], "scan": [...], "scan:int32": [...]}}

A chapter's key holds its default problem; ``"<chapter>:<set>"`` keys hold the other benchmark
problems ``pmpp bench --all-problems`` records (:func:`entries_for` gathers them all).

An entry is one variant or library routine at one problem size: see :func:`make_entry`.
Writing one chapter keeps the others already in the file (:func:`write_results`). Notebooks on a
machine without a GPU read the committed files with :func:`recorded` and show :func:`label`
beside every figure taken from them.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pmpp.timing import CPU_WALL_CLOCK, CUDA_EVENTS, Timing, gbps, gflops, is_noisy, on_gpu

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "results"
KINDS = ("variant", "library")
CLOCKS = (CUDA_EVENTS, CPU_WALL_CLOCK)


# ---------------------------------------------------------------------------------------------
# What machine, what software, what commit

def device_info(backend: Any = None) -> dict:
    """The device the numbers are taken on: name, compute capability, SMs, L2, memory, clocks.
    On the CPU engine, a description of the CPU engine (``"engine": "cpu"``, GPU fields None)."""
    if on_gpu(backend):
        info = _gpu_properties()
        info.pop("uuid", None)
        info.pop("pci_bus_id", None)
        return info
    return {"name": f"CPU engine ({platform.processor() or platform.machine()})", "engine": "cpu",
            "compute_capability": None, "sm_count": None, "l2_bytes": None, "memory_bytes": None,
            "cpu_count": os.cpu_count()}


# cudaDeviceAttr values; CUDA 13 removed clockRate and memoryClockRate from cudaDeviceProp but
# kept these attributes.
_ATTR_CLOCK_RATE = 13
_ATTR_MEMORY_CLOCK_RATE = 36
_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37


def _gpu_properties() -> dict:
    """Properties of the current CUDA device through CuPy, None where the runtime won't say."""
    import cupy

    rt = cupy.cuda.runtime
    dev = cupy.cuda.Device().id
    props = rt.getDeviceProperties(dev)
    name = props.get("name", b"unknown GPU")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    info = {
        "name": name.strip(),
        "engine": "cupy",
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": props.get("multiProcessorCount"),
        "l2_bytes": props.get("l2CacheSize"),
        "memory_bytes": props.get("totalGlobalMem"),
        "max_threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
        "sm_clock_khz": _attribute(rt, dev, _ATTR_CLOCK_RATE, props.get("clockRate")),
        "memory_clock_khz": _attribute(rt, dev, _ATTR_MEMORY_CLOCK_RATE, props.get("memoryClockRate")),
        "memory_bus_bits": _attribute(rt, dev, _ATTR_GLOBAL_MEMORY_BUS_WIDTH, props.get("memoryBusWidth")),
        "uuid": _uuid(props.get("uuid")),
        "pci_bus_id": _pci_bus_id(rt, dev),
    }
    if info["sm_clock_khz"] is None or info["memory_clock_khz"] is None:
        sm_mhz, mem_mhz = _nvidia_smi_max_clocks()
        info["sm_clock_khz"] = info["sm_clock_khz"] or (sm_mhz and sm_mhz * 1000)
        info["memory_clock_khz"] = info["memory_clock_khz"] or (mem_mhz and mem_mhz * 1000)
    return info


def _attribute(rt, dev: int, attr: int, fallback: Any) -> int | None:
    try:
        value = rt.deviceGetAttribute(attr, dev)
    except Exception:
        value = fallback
    return int(value) if value else None


def _uuid(raw: Any) -> str | None:
    if not raw:
        return None
    h = bytes(raw).hex() if not isinstance(raw, str) else raw
    if len(h) != 32:
        return str(h)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _pci_bus_id(rt, dev: int) -> str | None:
    try:
        return str(rt.deviceGetPCIBusId(dev))
    except Exception:
        return None


def _nvidia_smi(query: str) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    return line


def _nvidia_smi_max_clocks() -> tuple[int | None, int | None]:
    line = _nvidia_smi("clocks.max.sm,clocks.max.memory")
    try:
        sm, mem = (int(float(x)) for x in line.split(","))
        return sm, mem
    except (AttributeError, ValueError):
        return None, None


def versions(backend: Any = None) -> dict:
    """Versions of what the numbers depend on; None for what is not there."""
    v = {"driver": None, "cuda_runtime": None, "cupy": _dist_version("cupy"),
         "numpy": _dist_version("numpy"), "python": platform.python_version(),
         "torch": _dist_version("torch")}
    if on_gpu(backend):
        import cupy

        rt = cupy.cuda.runtime
        v["cupy"] = cupy.__version__
        v["cuda_runtime"] = _cuda_version(rt.runtimeGetVersion())
        v["cuda_driver_api"] = _cuda_version(rt.driverGetVersion())
        v["driver"] = _nvidia_smi("driver_version") or v["cuda_driver_api"]
        for name, version_of in LIBRARY_VERSIONS.items():
            if version := version_of():    # only when the library ran in this process
                v[name] = version
    return v


# Libraries that report their version once they have run (name -> a function that returns it, or
# None before): each library module registers itself, so that results need not import it.
LIBRARY_VERSIONS: dict[str, Callable[[], str | None]] = {}


def _cuda_version(n: int) -> str:
    return f"{n // 1000}.{(n % 1000) // 10}"


def _dist_version(name: str) -> str | None:
    if name == "cupy":   # published as cupy, cupy-cuda12x, cupy-cuda13x, ...
        for dist in metadata.distributions():
            dist_name = (dist.metadata["Name"] or "").lower()
            if dist_name == "cupy" or dist_name.startswith("cupy-cuda"):
                return dist.version
        return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_commit(repo: Path = REPO_ROOT) -> str | None:
    """The commit the code was at, with ``-dirty`` if tracked files had changes. ``$PMPP_COMMIT``,
    where set, is taken as given: it is how a copy of the tree made elsewhere (on a GPU machine,
    whose own ``.git`` may be missing or stale) says which commit it is. Else None outside git."""
    fallback = os.environ.get("PMPP_COMMIT") or None
    if fallback:
        return fallback
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=20)
        if sha.returncode != 0:
            return fallback
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return fallback
    return sha.stdout.strip() + ("-dirty" if status.stdout.strip() else "")


def device_slug(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def default_path(device: Mapping[str, Any] | None = None, commit: str | None = None) -> Path:
    """``results/<device-slug>-<commit>.json`` in the repository, for this device (or the one
    given) and the commit the code is at: a run at another commit goes to another file, so every
    file's date and commit are true of all the numbers in it."""
    device = device_info() if device is None else device
    commit = commit if commit is not None else (git_commit() or "unknown")
    short = commit.split("-")[0][:7] + ("-dirty" if commit.endswith("-dirty") else "")
    return RESULTS_DIR / f"{device_slug(device['name'])}-{short}.json"


# ---------------------------------------------------------------------------------------------
# Entries and files

def make_entry(name: str, kind: str, problem: str | Mapping[str, Any], timing: Timing,
               model: Any = None, correct: bool | None = None) -> dict:
    """One row of a chapter's results. ``model`` (a :class:`pmpp.chapters.base.Model`, or None
    where there is none) gives the bytes and flops from which GB/s, GFLOP/s and OP/B follow."""
    if kind not in KINDS:
        raise ValueError(f"entry {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(problem, str):
        problem = ", ".join(f"{k}={v}" for k, v in problem.items())
    entry = {"name": name, "kind": kind, "problem": problem,
             "median_us": timing.median_us, "min_us": timing.min_us, "max_us": timing.max_us,
             "q1_us": timing.q1_us, "q3_us": timing.q3_us, "noisy": timing.noisy,
             "gbps": None, "gflops": None, "intensity": None,
             "correct": None if correct is None else bool(correct), "clock": timing.clock}
    if model is not None:
        entry["gbps"] = gbps(model.bytes, timing.median_us) if model.bytes else None
        entry["gflops"] = gflops(model.flops, timing.median_us)
        entry["intensity"] = model.intensity if model.bytes else None
    return entry


def write_results(path: str | os.PathLike | None, chapter: str, entries: Sequence[Mapping[str, Any]],
                  ceilings: Any, *, device: Mapping[str, Any] | None = None,
                  software: Mapping[str, Any] | None = None, date: str | None = None,
                  commit: str | None = None) -> Path:
    """Write (or update) a results file with one chapter's entries and return its path.

    Chapters already in the file are kept; device, versions, date, commit, clock and ceilings
    are refreshed. ``ceilings`` is a :class:`pmpp.ceilings.Ceilings` or a dict with ``copy_gbs``
    and ``fp32_gflops``. ``path`` None means :func:`default_path` for this device; ``device``,
    ``software`` (versions), ``date`` and ``commit`` default to this machine's, now, HEAD."""
    device = dict(device_info() if device is None else device)
    commit = commit if commit is not None else (git_commit() or "unknown")
    path = Path(path) if path is not None else default_path(device, commit)
    old_chapters, old_versions = _chapters_to_keep(path, device, commit)
    entries = [dict(e) for e in entries]
    software = dict(versions() if software is None else software)
    data = {
        "device": device,
        "versions": {**{k: v for k, v in old_versions.items() if k == "cub"}, **software},
        "date": date or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "clock": _clock_of(entries),
        "ceilings": _ceilings_dict(ceilings),
        "chapters": {**old_chapters, chapter: entries},
    }
    data["chapters"] = dict(sorted(data["chapters"].items()))
    validate(data, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def _chapters_to_keep(path: Path, device: Mapping[str, Any], commit: str) -> tuple[dict, dict]:
    """The chapters already in ``path``, which the new entries join, and the versions recorded
    with them: only if they were recorded on the same device at the same commit, since the file's
    label speaks for all of them."""
    if not path.exists():
        return {}, {}
    old = load_results(path)
    ensure_same_run(path, old, device, commit)
    return old["chapters"], old.get("versions", {})


def ensure_same_run(path: Path, old: Mapping[str, Any], device: Mapping[str, Any], commit: str) -> None:
    """Refuse to add to the recording ``old`` (read from ``path``) numbers taken on another device
    or at another commit: a file's label speaks for everything in it."""
    if old["commit"] != commit or old["device"].get("name") != device.get("name"):
        raise ValueError(f"{path} holds results from {old['device'].get('name')} at commit "
                         f"{old['commit']}; these are from {device.get('name')} at {commit}. "
                         "Write them to another file (--out, or the default path, which names the commit).")


def entries_for(run: Mapping[str, Any], chapter: str) -> list[dict]:
    """All of one chapter's entries in a results dict: its default problem (key ``chapter``) and
    its other benchmark problems (keys ``"<chapter>:<set>"``)."""
    return [e for key, entries in run["chapters"].items()
            if key == chapter or key.startswith(chapter + ":") for e in entries]


def _clock_of(entries: Sequence[Mapping[str, Any]]) -> str:
    clocks = {e.get("clock", CUDA_EVENTS) for e in entries}
    if len(clocks) > 1:
        raise ValueError(f"entries were timed with different clocks ({sorted(clocks)}): keep CPU and GPU "
                         "timings in separate results files")
    return clocks.pop() if clocks else CUDA_EVENTS


def _ceilings_dict(ceilings: Any) -> dict:
    if ceilings is None:
        raise ValueError("write_results needs the device's ceilings (pmpp.ceilings.ceilings())")
    if isinstance(ceilings, Mapping):
        d = dict(ceilings)
    else:
        d = {k: getattr(ceilings, k) for k in ("copy_gbs", "read_gbs", "fp32_gflops", "peak_bw_gbs",
                                               "peak_fp32_gflops", "measured_on") if hasattr(ceilings, k)}
    return d


def load_results(path: str | os.PathLike) -> dict:
    """Read and check a results file; a malformed one raises ValueError naming file and field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    validate(data, path)
    return data


def recorded(chapter: str | None = None, directory: str | os.PathLike | None = None) -> list[dict]:
    """The committed results in ``results/`` (or ``directory``), newest first; with ``chapter``,
    only files that have that chapter. For machines without a GPU: show these, with :func:`label`."""
    directory = Path(directory) if directory is not None else RESULTS_DIR
    found = [load_results(p) for p in sorted(directory.glob("*.json"))]
    found = [r for r in found if r.get("clock", CUDA_EVENTS) == CUDA_EVENTS]
    if chapter is not None:
        found = [r for r in found if r["chapters"].get(chapter)]
    return sorted(found, key=lambda r: _parse_date(r["date"]), reverse=True)


def label(results: Mapping[str, Any]) -> str:
    """E.g. ``"recorded on NVIDIA H100 80GB HBM3, 2026-11-21 (commit abc1234)"``."""
    date = _parse_date(results["date"]).date().isoformat()
    commit = str(results.get("commit") or "unknown")
    short = commit.split("-")[0][:7] + ("-dirty" if commit.endswith("-dirty") else "")
    what = "recorded" if results.get("clock", CUDA_EVENTS) == CUDA_EVENTS else "CPU wall clock, recorded"
    return f"{what} on {results['device']['name']}, {date} (commit {short})"


# ---------------------------------------------------------------------------------------------
# Validation

def validate(data: Any, path: Any = "<results>") -> None:
    """Raise ValueError naming ``path`` and the first malformed field of a results dict."""
    def bad(field: str, want: str, got: Any = None) -> None:
        raise ValueError(f"{path}: field {field!r} {want}, got {got!r}")

    if not isinstance(data, dict):
        bad("<top>", "must be a JSON object", type(data).__name__)
    for key, kind in (("device", dict), ("versions", dict), ("date", str), ("commit", str),
                      ("ceilings", dict), ("chapters", dict)):
        if key not in data:
            raise ValueError(f"{path}: field {key!r} is missing")
        if not isinstance(data[key], kind):
            bad(key, f"must be a {'JSON object' if kind is dict else 'string'}", data[key])
    if not isinstance(data["device"].get("name"), str):
        bad("device.name", "must be a string", data["device"].get("name"))
    try:
        _parse_date(data["date"])
    except ValueError:
        bad("date", "must be an ISO-8601 date", data["date"])
    if data.get("clock", CUDA_EVENTS) not in CLOCKS:
        bad("clock", f"must be one of {CLOCKS}", data.get("clock"))
    for key in ("copy_gbs", "fp32_gflops"):
        if not _positive(data["ceilings"].get(key)):
            bad(f"ceilings.{key}", "must be a positive number", data["ceilings"].get(key))
    for chapter, entries in data["chapters"].items():
        if not isinstance(entries, list):
            bad(f"chapters.{chapter}", "must be a list of entries", entries)
        for i, entry in enumerate(entries):
            _validate_entry(entry, f"chapters.{chapter}[{i}]", bad)


def _validate_entry(entry: Any, where: str, bad) -> None:
    if not isinstance(entry, dict):
        bad(where, "must be a JSON object", entry)
    for key in ("name", "problem"):
        if not isinstance(entry.get(key), str):
            bad(f"{where}.{key}", "must be a string", entry.get(key))
    if entry.get("kind") not in KINDS:
        bad(f"{where}.kind", f"must be one of {KINDS}", entry.get("kind"))
    for key in ("median_us", "min_us", "max_us"):
        if not _positive(entry.get(key)):
            bad(f"{where}.{key}", "must be a positive number", entry.get(key))
    for key in ("gbps", "gflops", "intensity", "q1_us", "q3_us"):
        if entry.get(key) is not None and not _number(entry.get(key)):
            bad(f"{where}.{key}", "must be a number or null", entry.get(key))
    if entry.get("correct") is not None and not isinstance(entry.get("correct"), bool):
        bad(f"{where}.correct", "must be true, false or null", entry.get("correct"))
    if not isinstance(entry.get("noisy", False), bool):
        bad(f"{where}.noisy", "must be true or false", entry.get("noisy"))
    if not isinstance(entry.get("config", {}), dict):
        bad(f"{where}.config", "must be a JSON object (the tunable parameters the row was built with)",
            entry.get("config"))


def noisy(entry: Mapping[str, Any]) -> bool:
    """Whether a recorded row's repeats disagreed (:attr:`pmpp.Timing.noisy`): its own flag where
    it was recorded with one, else the same rule applied to its median and minimum."""
    if "noisy" in entry:
        return bool(entry["noisy"])
    return is_noisy(entry["median_us"], entry["min_us"])


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _positive(x: Any) -> bool:
    return _number(x) and x > 0


def _parse_date(s: str) -> _dt.datetime:
    d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=_dt.timezone.utc)
