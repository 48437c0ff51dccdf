"""Occupancy: how many blocks of a kernel one SM holds at once, and which resource stops it holding
more — the CUDA Occupancy Calculator's arithmetic, for named GPUs, with or without a GPU.

    k = pmpp.load("reduction/03_shared_memory.cu", defines={"BLOCK_DIM": 256}).get_function(
        "SharedMemorySumReductionKernel")
    print(occupancy(k, 256, gpu="T4"))           # registers and shared memory from nvcc -arch=sm_75
    occupancy(k, 256, registers=64)              # what if it used 64 registers?
    occupancy_from_resources(registers=64, static_shared=0, block=1024).occupancy    # 0.5

A kernel's registers and static ``__shared__`` bytes come from compiling it for the GPU's arch
(``nvcc -Xptxas -v``, through :mod:`pmpp.compilecheck`), or, where nvcc is missing, from the values
recorded in ``results/resources/nvcc-<version>.json`` (:func:`record_resources` writes that file).

The arithmetic is that of NVIDIA's ``cuda_occupancy.h`` (what ``cudaOccupancyMaxActiveBlocksPer
Multiprocessor`` computes), in its default state: no cache or carveout preference. Per block:

* warps: threads / 32, rounded up; the SM holds ``max_warps_per_sm`` of them.
* registers: registers per thread x 32, rounded up to 256, per warp. The register file is split
  into 4 sub-partitions (a quarter each), and a warp's registers must fit in one, so the SM holds
  ``4 * floor((64K / 4) / registers_per_warp)`` warps. A block whose warps, counted in whole groups
  of 4, need more than 64K registers cannot run at all.
* shared memory: static + dynamic + the 1 KB the driver reserves per block (sm_80 and newer),
  rounded up to the allocation unit (128 B; 256 B before sm_80).
* blocks: at most ``max_blocks_per_sm``, however small the block.

The shared-memory carveout. With no preference (``cudaSharedmemCarveoutDefault``, the state a
plain launch is in), ``cuda_occupancy.h`` takes the SM's whole shared-memory capacity
(``sharedMemPerMultiprocessor``: 228 KB on the H100) as the carveout: the driver sizes the
L1/shared split for the kernel when it launches it. ``carveout=`` (a percentage, as
``cudaFuncAttributePreferredSharedMemoryCarveout``) asks what a preference would do: the share is
rounded up to a size the SM offers, and never below what one block needs.

Not modelled: ``__launch_bounds__``' own block limit, block barriers and clusters (neither limits
the workbook's kernels on these GPUs), and partitioned global caching (sm_52/sm_6x only).
"""
from __future__ import annotations

import sys
import types

import datetime as _dt
import hashlib
import html
import json
import numbers
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import pmpp.compilecheck as compilecheck
from .errors import BackendUnavailableError, CompileError
from .gpus import (GPUS, KB, RECORD_ARCHS, GPUSpec, KernelResources, Occupancy, gpu_spec,
                   gpu_spec_for_device_name, occupancy_from_resources)
from .results import RESULTS_DIR, git_commit
from .source import define_options, expand_includes, kernels_dir

__all__ = ["GPUS", "GPUSpec", "KernelResources", "Occupancy", "gpu_spec", "gpu_spec_for_device_name",
           "kernel_resources", "occupancy", "occupancy_from_resources", "record_resources",
           "recorded_resources"]

RESOURCES_DIR = RESULTS_DIR / "resources"


# ---------------------------------------------------------------------------------------------
# A kernel's registers and static shared memory

def occupancy(kernel, block, shared_mem: int = 0, gpu: str | GPUSpec = "H100", *,
              registers: int | None = None, static_shared: int | None = None,
              carveout: int | None = None) -> Occupancy:
    """The occupancy of ``kernel`` launched with ``block`` threads and ``shared_mem`` bytes of
    dynamic shared memory on ``gpu`` (a name from :data:`GPUS`; the GPU need not be here).

    ``kernel``: a :class:`pmpp.Function` (compiled for ``gpu``'s arch with nvcc, or looked up in the
    recorded resources), a :class:`KernelResources`, or a CuPy ``RawKernel``. ``registers=`` and
    ``static_shared=`` replace what the kernel uses ("what if it used 64 registers?"); with both,
    ``kernel`` may be None. Past 48 KB of shared memory a kernel must opt in
    (``cudaFuncSetAttribute``; pmpp does it at launch): the calculation assumes it has."""
    spec = gpu_spec(gpu)
    if registers is not None and static_shared is not None:
        resources = KernelResources(registers, static_shared, getattr(kernel, "name", None))
    elif kernel is None:
        raise TypeError("pass a kernel (a pmpp.Function), or describe one with registers= and "
                        "static_shared=")
    else:
        found = kernel_resources(kernel, spec)
        resources = KernelResources(found.registers if registers is None else registers,
                                    found.static_shared_bytes if static_shared is None else static_shared,
                                    found.name, _with_overrides(found, registers, static_shared))
    return occupancy_from_resources(resources.registers, resources.static_shared_bytes, block, shared_mem,
                                    spec, carveout=carveout, kernel=resources.name,
                                    resources_from=resources.origin)


def _with_overrides(found: KernelResources, registers, static_shared) -> str:
    given = [f"{what}={value} given (the kernel: {was})"
             for what, value, was in (("registers", registers, found.registers),
                                      ("static_shared", static_shared, found.static_shared_bytes))
             if value is not None]
    return "; ".join([found.origin, *given])


def kernel_resources(kernel, gpu: str | GPUSpec = "H100") -> KernelResources:
    """Registers per thread and static shared bytes of ``kernel`` compiled for ``gpu``'s arch.

    A :class:`pmpp.Function` is compiled with nvcc (``ptxas -v``; cached per source, defines, name
    expressions and arch); without nvcc its numbers come from the recorded resources. A kernel
    that does not compile for the arch raises :class:`pmpp.CompileError` saying it cannot run there."""
    spec = gpu_spec(gpu)
    if isinstance(kernel, KernelResources):
        return kernel
    if hasattr(kernel, "module") and hasattr(kernel.module, "source"):
        return _function_resources(kernel, spec)
    if hasattr(kernel, "num_regs") and hasattr(kernel, "shared_size_bytes"):      # cupy.RawKernel
        return KernelResources(kernel.num_regs, kernel.shared_size_bytes, getattr(kernel, "name", None),
                               "the loaded kernel (cuFuncGetAttribute, on the GPU it was loaded on)")
    if hasattr(kernel, "registers") and hasattr(kernel, "static_shared_bytes"):
        return KernelResources(kernel.registers, kernel.static_shared_bytes, getattr(kernel, "name", None),
                               getattr(kernel, "origin", "given"))
    raise TypeError(f"cannot read a kernel's registers from {kernel!r}: pass a pmpp.Function "
                    "(pmpp.load(...).get_function(name)), a KernelResources, or registers= and static_shared=")


def _function_resources(function, spec: GPUSpec) -> KernelResources:
    module = function.module
    try:
        nvcc = compilecheck.find_nvcc()
    except BackendUnavailableError:
        return _recorded_kernel(function, spec)
    report = _compiled(module.source, module.filename, _defines_key(module.defines),
                       tuple(module.name_expressions), spec.arch, nvcc)
    if isinstance(report, CompileError):
        raise CompileError(f"{function.name} from {module.filename} does not compile for the {spec.name} "
                           f"({spec.arch}), so it cannot run there: {_first_line(report)}",
                           filename=report.filename, line=report.line, log=report.log) from None
    row = _find_kernel(report, function.name)
    if row is None:
        raise ValueError(f"nvcc's report for {module.filename} ({spec.arch}) has no kernel "
                         f"{function.name!r}; it has: {', '.join(r['kernel'] for r in report) or 'none'}")
    return KernelResources(row["registers"], row["shared_bytes"], function.name,
                           f"nvcc {_nvcc_version(nvcc)[0]} -arch={spec.arch} (ptxas -v)")


_COMPILED: dict[tuple, Any] = {}     # (source, filename, defines, name expressions, arch) -> rows or CompileError


def _compiled(source: str, filename: str, defines: str, names: tuple, arch: str, nvcc: str):
    key = (source, filename, defines, names, arch)
    if key not in _COMPILED:
        path = kernels_dir() / filename
        include = (path.parent,) if path.is_file() else ()
        flags = dict(_parse_define(d) for d in defines.split())
        try:
            _COMPILED[key] = compilecheck.check_source(source, arch, filename=filename, defines=flags,
                                                       name_expressions=names, include_dirs=include)
        except CompileError as exc:
            _COMPILED[key] = exc
    return _COMPILED[key]


def _parse_define(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    return name, (value if value else True)


def _defines_key(defines: Mapping[str, Any] | None) -> str:
    """``{"B": 2, "A": 1}`` -> ``"A=1 B=2"``: the same text whatever order the macros came in."""
    return " ".join(sorted(flag[2:] for flag in define_options(defines) if flag.startswith("-D")))


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _kernel_key(name: str) -> str:
    """``"reduce5<256u>"`` and ``"reduce5<256>"`` -> ``"reduce5<256>"`` (demangled names carry the
    template arguments' integer suffixes and casts; name expressions usually do not)."""
    key = re.sub(r"\s+", "", name)
    key = re.sub(r"\((?:unsigned|signed)?(?:char|short|int|long)+\)(?=-?\d)", "", key)
    return re.sub(r"(?<![\w.])(-?\d+)(?:[uU]|[lL]{1,2}|[uU][lL]{1,2}|[lL]{1,2}[uU])\b", r"\1", key)


def _find_kernel(rows: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((r for r in rows if _kernel_key(r["kernel"]) == _kernel_key(name)), None)


@lru_cache(maxsize=None)
def _nvcc_version(nvcc: str) -> tuple[str, str]:
    """(release, full version): ``("13.0", "13.0.88")``."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)", out)
    return (m.group(1), m.group(2)) if m else ("unknown", "unknown")


# ---------------------------------------------------------------------------------------------
# Recorded resources: the fallback where nvcc is missing

def record_resources(path: str | os.PathLike | None = None, archs: Sequence[str] = RECORD_ARCHS) -> Path:
    """Compile every variant of every chapter (its defines and name expressions) for each arch and
    write what ptxas reports, with the nvcc version, date and commit, to ``path`` (default
    ``results/resources/nvcc-<release>.json``). A variant that does not compile for an arch, or
    needs a newer one (its ``min_arch``), is recorded with the reason. Returns the path written."""
    import pmpp.chapters as chapters
    nvcc = compilecheck.find_nvcc()
    release, version = _nvcc_version(nvcc)
    jobs = [(chapter.kernel_path(v), dict(v.defines), tuple(v.name_expressions), v.min_arch, arch)
            for chapter in map(chapters.get, chapters.names()) for v in chapter.variants for arch in archs]
    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(_record_one, jobs))
    files = sorted({job[0] for job in jobs})
    data = {"nvcc": release, "nvcc_version": version,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(), "archs": list(archs),
            "sources": {f: source_digest(f) for f in files},
            "kernels": [row for rows, _ in outcomes for row in rows],
            "failures": [failure for _, failure in outcomes if failure]}
    path = Path(path) if path is not None else RESOURCES_DIR / f"nvcc-{release}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_dumps(data))
    recorded_resources.cache_clear()
    return path


def _record_one(job) -> tuple[list[dict], dict | None]:
    rel, defines, names, min_arch, arch = job
    where = {"file": rel, "defines": _defines_key(defines), "arch": arch}
    if min_arch > int(arch.split("_")[1]):
        return [], {**where, "error": f"the variant needs sm_{min_arch} or newer (its min_arch)"}
    path = kernels_dir() / rel
    try:
        rows = compilecheck.check_source(path.read_text(), arch, filename=rel, defines=defines,
                                         name_expressions=names, include_dirs=(path.parent,))
    except CompileError as exc:
        return [], {**where, "error": _first_line(exc)}
    keep = ("kernel", "registers", "shared_bytes", "stack_bytes", "spill_stores", "spill_loads", "barriers")
    return [{**where, **{k: row[k] for k in keep}} for row in rows], None


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                                re.DOTALL)


def _digest(text: str) -> str:
    """A digest of a kernel file's code: comments and layout do not change it (a comment or an
    exercise's marker changes no register count)."""
    code = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)
    return hashlib.sha256(" ".join(code.split()).encode()).hexdigest()[:16]


def source_digest(relative: str) -> str:
    """:func:`_digest` of the kernel file ``relative`` (to ``kernels/``) with the headers it
    includes written in: a change to a shared header changes every file that includes it."""
    path = kernels_dir() / relative
    return _digest(expand_includes(path.read_text(), relative, path.parent))


def _dumps(data: Mapping[str, Any]) -> str:
    """JSON with one kernel (or failure) a line, so that a re-recording diffs line by line."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = ",\n    ".join(json.dumps(v) for v in value)
            parts.append(f"  {json.dumps(key)}: [\n    {rows}\n  ]")
        elif isinstance(value, dict) and value:
            rows = ",\n    ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            parts.append(f"  {json.dumps(key)}: {{\n    {rows}\n  }}")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


@lru_cache(maxsize=None)
def recorded_resources(path: str | os.PathLike | None = None) -> dict | None:
    """The recorded resources (the newest ``results/resources/nvcc-*.json``, or ``path``), indexed:
    ``{"path", "nvcc", "date", "sources", "kernels": {(file, defines, arch): [row]},
    "failures": {(file, defines, arch): error}}``; None if there is no recording."""
    if path is None:
        found = sorted(RESOURCES_DIR.glob("nvcc-*.json"), key=_version_order)
        if not found:
            return None
        path = found[-1]
    path = Path(path)
    data = json.loads(path.read_text())
    kernels: dict[tuple, list] = {}
    for row in data["kernels"]:
        kernels.setdefault((row["file"], row["defines"], row["arch"]), []).append(row)
    failures = {(f["file"], f["defines"], f["arch"]): f["error"] for f in data["failures"]}
    return {"path": path, "nvcc": data["nvcc"], "date": data["date"], "sources": data.get("sources", {}),
            "kernels": kernels, "failures": failures}


def _version_order(path: Path) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path.stem))


def _recorded_kernel(function, spec: GPUSpec) -> KernelResources:
    module = function.module
    recording = recorded_resources()
    what = f"{function.name} from {module.filename}"
    if recording is None:
        raise BackendUnavailableError(f"nvcc not found, and no recorded resources in {RESOURCES_DIR}: install "
                                      f"the CUDA toolkit (nvcc) to read {what}'s registers, or pass "
                                      "registers= and static_shared=")
    key = (module.filename, _defines_key(module.defines), spec.arch)
    name = recording["path"].name
    origin = f"recorded in results/resources/{name} (nvcc {recording['nvcc']}, {recording['date'][:10]})"
    if key in recording["failures"]:
        raise CompileError(f"{what} does not compile for the {spec.name} ({spec.arch}), so it cannot run "
                           f"there: {recording['failures'][key]} ({origin})", filename=module.filename)
    row = _find_kernel(recording["kernels"].get(key, ()), function.name)
    if row is None:
        defines = f" with defines {key[1]}" if key[1] else ""
        raise BackendUnavailableError(
            f"nvcc not found, and {what}{defines} is not among the kernels recorded in "
            f"results/resources/{name} (the workbook's variants, with their default defines, for "
            f"{', '.join(sorted({k[2] for k in recording['kernels']}))}): install the CUDA toolkit (nvcc) "
            "to compile it, or pass registers= and static_shared=")
    if recording["sources"].get(module.filename) not in (None, _digest(expand_includes(
            module.source, module.filename, getattr(module, "directory", None) or kernels_dir()))):
        origin += "; the .cu file has changed since, so these may be out of date"
    return KernelResources(row["registers"], row["shared_bytes"], function.name, origin)


class _CallableModule(types.ModuleType):
    """``pmpp.occupancy(...)`` calls :func:`occupancy`; ``pmpp.occupancy.<name>`` is the rest of the module."""

    def __call__(self, *args, **kwargs):
        return occupancy(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
