"""NVRTC, CUDA's runtime compiler and the compiler of pmpp's GPU backend, as the first check of
kernel code on the CPU engine: where libnvrtc can be found (the ``nvidia-cuda-nvrtc`` wheel, CuPy's
or a CUDA toolkit's), the source is compiled with it, front end only (``-fdevice-syntax-only``),
for the engine's target GPU, and an error NVRTC reports in the user's code is a CompileError at
its line. An error that comes from a header NVRTC cannot find (``<cstdio>``, ``<curand_kernel.h>``
where no toolkit provides it) or from inside a header is no verdict on the user's code: the check
is then skipped, with the reason, and the engine's own device-code check (:mod:`.devicecheck`)
stands alone.

    verdict = check(src, filename, options, name_expressions, cache_dir)
    verdict   # "nvrtc 13.5: passed", "skipped: nvrtc not installed (pip install nvidia-cuda-nvrtc)"

A verdict other than a refusal is cached under the source, options, target and NVRTC version.
``$PMPP_NVRTC=0`` turns the check off.
"""

import ctypes
import ctypes.util
import functools
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pmpp.errors import CompileError

from pmpp.backends.cpu.diagnostics import quote_line
from pmpp.backends.cpu.limits import run_limited
from pmpp.backends.cpu.toolchain import cache_dir as engine_cache

CHECK_VERSION = "1"
ENV_VAR = "PMPP_NVRTC"
NOT_INSTALLED = "skipped: nvrtc not installed (pip install nvidia-cuda-nvrtc)"
DEFAULT_ARCH = "sm_90"
# the options that change what NVRTC's front end accepts; the rest are for code generation
_FRONT_END_OPTIONS = re.compile(r"^(?:-[DUI]|--(?:define-macro|undefine-macro|include-path)\b|--?std\b"
                                r"|--?expt-relaxed-constexpr$|--?extended-lambda$|--?default-device$"
                                r"|--?expt-extended-lambda$|--?pre-include\b|-include\b)")
_DIAGNOSTIC = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<kind>catastrophic error|error|warning|remark)"
                         r"(?: #\S+)?(?P<id>[^:]*): (?P<message>.*)$")
_MISSING_HEADER = re.compile(r'(?:could not|cannot) open source file "([^"]+)"')


def enabled():
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "off", "no", "false")


# ---- finding and loading libnvrtc -------------------------------------------------------------

@dataclass(frozen=True)
class Nvrtc:
    path: str
    lib: object          # the ctypes library
    version: tuple       # (major, minor)
    archs: tuple         # the compute capabilities it compiles for, as ints (75, 80, ...)

    @property
    def name(self):
        return f"nvrtc {self.version[0]}.{self.version[1]}"


def candidates():
    """Paths where libnvrtc may be, best first: the pip wheels (CUDA 13's ``nvidia/cu13``, CUDA
    12's ``nvidia/cuda_nvrtc``, which CuPy's wheels use too), a CUDA toolkit ($CUDA_PATH,
    $CUDA_HOME, nvcc's), then the system's library path."""
    found = []
    for site in _nvidia_package_dirs():
        for pattern in ("cu*/lib/libnvrtc.so.*", "cuda_nvrtc/lib/libnvrtc.so.*",
                        "cu*/bin/**/nvrtc64_*.dll", "cuda_nvrtc/bin/nvrtc64_*.dll",
                        "cu*/lib/libnvrtc.*.dylib"):
            found += sorted(glob.glob(os.path.join(site, pattern), recursive=True), reverse=True)
    for root in _toolkit_roots():
        for pattern in ("lib64/libnvrtc.so*", "lib/libnvrtc.so*", "targets/*/lib/libnvrtc.so*",
                        "bin/nvrtc64_*.dll", "bin/x64/nvrtc64_*.dll"):
            found += sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
    system = ctypes.util.find_library("nvrtc")
    found += [system] if system else []
    return [p for p in dict.fromkeys(found) if _is_nvrtc(p)]


def _is_nvrtc(path):
    name = os.path.basename(path)
    return "builtins" not in name and ".alt." not in name and not name.endswith(".a")


def _nvidia_package_dirs():
    try:
        import nvidia
    except ImportError:
        return []
    return list(getattr(nvidia, "__path__", []))


def _toolkit_roots():
    roots = [os.environ.get(var) for var in ("CUDA_PATH", "CUDA_HOME")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]


@functools.lru_cache(maxsize=None)
def library():
    """The first libnvrtc of :func:`candidates` that loads, or None."""
    for path in candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        return Nvrtc(path, lib, _version(lib), _archs(lib))
    return None


def _version(lib):
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def _archs(lib):
    count = ctypes.c_int()
    if not hasattr(lib, "nvrtcGetNumSupportedArchs") or lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)):
        return ()
    archs = (ctypes.c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return tuple(archs)


# ---- headers ----------------------------------------------------------------------------------

def include_dirs(nvrtc, cache_dir):
    """Where NVRTC looks for ``#include <...>``: the CUDA and CCCL headers that NVRTC 13 bundles
    (extracted once into the cache; they match its version), then a CUDA toolkit's, as CuPy gives
    its NVRTC. No C or C++ library: NVRTC has none, and device code gets none on the GPU."""
    dirs = []
    bundled = _bundled_headers(nvrtc, Path(cache_dir))
    if bundled:
        dirs += [bundled, os.path.join(bundled, "cccl")]
    dirs += [os.path.join(root, "include") for root in _toolkit_roots()
             if os.path.isfile(os.path.join(root, "include", "cuda_runtime.h"))]
    return dirs


def _bundled_headers(nvrtc, cache_dir):
    install = getattr(nvrtc.lib, "nvrtcInstallBundledHeaders", None)
    if install is None:
        return None
    where = cache_dir / f"nvrtc-headers-{nvrtc.version[0]}.{nvrtc.version[1]}"
    if (where / "cuda_fp16.h").exists():
        return str(where)
    error = ctypes.c_char_p()
    # flags 0: skip if this version is installed; NVRTC locks against other processes
    if install(str(where).encode(), 0, ctypes.byref(error)) != 0:
        return None
    return str(where)


# ---- the check --------------------------------------------------------------------------------

def target_arch():
    """``compute_90`` for the engine's target ($PMPP_TARGET, else the H100's sm_90)."""
    import pmpp.targets as targets
    spec = targets.target_from_env()
    return (spec.arch if spec else DEFAULT_ARCH).replace("sm_", "compute_")


def front_end_options(options):
    """The options of ``options`` (NVRTC-style, as given to the GPU backend) that NVRTC's front end
    needs: macros, include paths, the language standard and the language extensions."""
    opts, kept, i = [str(o) for o in options], [], 0
    while i < len(opts):
        opt = opts[i]
        i += 1
        if not _FRONT_END_OPTIONS.match(opt):
            continue
        kept.append(opt)
        if opt in ("-D", "-U", "-I", "--define-macro", "--undefine-macro", "--include-path",
                   "--pre-include", "-include", "-std", "--std") and i < len(opts):
            kept.append(opts[i])
            i += 1
    return kept


def check(src, filename, options=(), name_expressions=(), cache_dir=None, digest=None):
    """NVRTC's verdict on ``src`` (the source with its ``#line 1 "filename"``): "nvrtc X.Y: passed"
    or "skipped: why"; raises CompileError at the line of the first error NVRTC finds in the
    user's code. ``digest(*parts)`` makes the cache key (the engine's)."""
    if not enabled():
        return f"skipped: turned off by ${ENV_VAR}"
    nvrtc = library()
    if nvrtc is None:
        return NOT_INSTALLED
    arch = target_arch()
    if nvrtc.archs and int(arch.split("_")[1]) not in nvrtc.archs:
        return f"skipped: {nvrtc.name} does not compile for {arch.replace('compute_', 'sm_')}"
    opts = [f"--gpu-architecture={arch}", "-fdevice-syntax-only", *front_end_options(options)]
    src = _with_user_headers(src, filename, options)
    verdict_file = None
    if cache_dir is not None and digest is not None:
        key = digest(CHECK_VERSION, nvrtc.path, nvrtc.version, src, filename, *opts, *name_expressions)[:32]
        verdict_file = Path(cache_dir) / f"nvrtc-{key}.json"
        if verdict_file.exists():
            return json.loads(verdict_file.read_text())["verdict"]
    system_dirs = []
    if re.search(r"^[ \t]*#[ \t]*include[ \t]*<", src, re.M):
        system_dirs = include_dirs(nvrtc, cache_dir or engine_cache())
    status, log = compile_program(nvrtc, src, filename, [*opts, *(f"-I{d}" for d in system_dirs)],
                                  name_expressions)
    verdict = judge(nvrtc, status, log, src, filename, system_dirs, defined_macros(opts))
    if verdict_file is not None:
        tmp = verdict_file.with_name(f".{verdict_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"verdict": verdict}))
        os.replace(tmp, verdict_file)
    return verdict


def _with_user_headers(src, filename, options):
    """``src`` with its ``#include "header"`` written in (pmpp.load has done so already; a
    CpuModule built directly may still have them), as both backends compile it."""
    from pmpp.source import expand_includes, include_dirs as option_include_dirs
    return expand_includes(src, filename, Path(filename).parent, option_include_dirs(options))


def compile_program(nvrtc, src, filename, options, name_expressions=()):
    """(nvrtcResult of the compile, its log) for ``src`` compiled as ``filename``, in a child
    process under the engine's compile limits (see nvrtc_compile.py); a limit reached is a
    CompileError that says which, as for g++."""
    request = {"library": str(nvrtc.path), "source": src, "filename": filename,
               "options": list(options), "names": [str(e) for e in name_expressions]}
    with tempfile.TemporaryDirectory(prefix="pmpp-nvrtc-") as tmp:
        path = Path(tmp) / "request.json"
        path.write_text(json.dumps(request))
        status, log = run_limited([sys.executable, "-I", "-S", str(_CHILD), str(path)], tmp, filename,
                                  tool=nvrtc.name)
    if status is not None and status < 0:
        return status, f"the NVRTC process ended with signal {-status}: {log.strip()}"
    return status, log


_CHILD = Path(__file__).with_name("nvrtc_compile.py")


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    kind: str
    message: str
    quote: tuple      # the lines NVRTC printed under it (the source line, the caret)


def diagnostics(log):
    """The errors and warnings of an NVRTC log, in order."""
    found, lines = [], log.splitlines()
    for i, text in enumerate(lines):
        m = _DIAGNOSTIC.match(text)
        if m:
            quote = tuple(q for q in lines[i + 1:i + 3] if q.strip() and not _DIAGNOSTIC.match(q))
            found.append(Diagnostic(m["file"], int(m["line"]), m["kind"], m["message"].strip(), quote))
    return found


def judge(nvrtc, status, log, src, filename, system_dirs=(), macros=()):
    """The verdict of a compile (see :func:`check`): passed, skipped, or a CompileError raised.
    ``system_dirs``: the CUDA headers' folders NVRTC was given; an error inside them (or inside
    NVRTC's builtin header) is not the user's (a toolkit of another version than NVRTC's, say),
    unless it is on a line that uses one of the user's ``macros`` (a ``-DT=4`` turns NVRTC's own
    ``template<typename T>`` into an error: the GPU backend fails on it too)."""
    errors = [d for d in diagnostics(log) if "error" in d.kind]
    if status == 0 and not errors:
        return f"{nvrtc.name}: passed"
    for d in errors:
        missing = _MISSING_HEADER.search(d.message)
        if missing:
            return f"skipped: <{missing.group(1)}> not available to NVRTC"
    foreign = [d for d in errors if _inside(d.file, system_dirs) or os.path.basename(d.file) == _BUILTIN_HEADER]
    if foreign:
        d = foreign[0]
        clash = _macros_in(d, macros)
        if clash:
            raise macro_clash(nvrtc, d, clash, log, filename)
        return f"skipped: {nvrtc.name} failed in {os.path.basename(d.file)}: {d.message}"
    if not errors:
        reason = log.strip().splitlines()[0] if log.strip() else f"status {status}"
        return f"skipped: {nvrtc.name} could not run ({reason})"
    raise refusal(nvrtc, errors, log, src, filename)


_BUILTIN_HEADER = "__nv_nvrtc_builtin_header.h"


def _macros_in(diagnostic, macros):
    words = set(re.findall(r"[A-Za-z_]\w*", " ".join(diagnostic.quote)))
    return sorted(set(macros) & words)


def macro_clash(nvrtc, diagnostic, names, log, filename):
    listed = ", ".join(names)
    return CompileError(
        f"{filename}: the macro{'s' if len(names) > 1 else ''} {listed} (from defines= or -D) "
        f"break{'' if len(names) > 1 else 's'} CUDA's own header {os.path.basename(diagnostic.file)}: "
        f"{diagnostic.message}\n{chr(10).join(diagnostic.quote)}\nnote: {nvrtc.name}, the compiler of "
        f"pmpp's GPU backend, defines the macros before its headers, so this source would not load on a "
        f"GPU either: give the macro a longer name (TILE_DIM rather than T). ${ENV_VAR}=0 turns this "
        f"check off.", filename=filename, log=log)


def defined_macros(options):
    """Names the ``-DNAME`` / ``-DNAME=value`` / ``--define-macro NAME`` options define."""
    names, options = [], list(options)
    for i, option in enumerate(options):
        text = option
        if option in ("-D", "--define-macro") and i + 1 < len(options):
            text = "-D" + options[i + 1]
        elif option.startswith("--define-macro="):
            text = "-D" + option.split("=", 1)[1]
        m = re.match(r"-D([A-Za-z_]\w*)", text)
        if m:
            names.append(m.group(1))
    return names


def _inside(file, folders):
    path = os.path.abspath(file)
    return any(path.startswith(os.path.abspath(folder) + os.sep) for folder in folders)


def refusal(nvrtc, errors, log, src, filename):
    first = errors[0]
    more = len(errors) - 1
    message = "\n".join([
        f"{first.file}:{first.line}: {first.message}", *_quote(first, src, filename),
        f"note: {nvrtc.name}, the compiler of pmpp's GPU backend, refuses this source, so it would not "
        "load on a GPU either. Under NVRTC every function must be __device__ or __global__, and there "
        "is no C or C++ library (no <climits>, <cstdint>, <cstdio>): what the CPU engine's prelude "
        f"happens to supply does not exist there. ${ENV_VAR}=0 turns this check off."])
    if more:
        message += f"\n(and {more} more error{'s' if more > 1 else ''} after this one)"
    return CompileError(message, filename=first.file, line=first.line, log=log)


def _quote(diagnostic, src, filename):
    """The line quoted as the engine quotes g++'s errors, with NVRTC's caret (NVRTC prints the
    line and the caret line indented by two spaces, tabs kept)."""
    column = None
    if len(diagnostic.quote) == 2 and "^" in diagnostic.quote[1]:
        caret = diagnostic.quote[1]
        column = len(caret[2:caret.index("^")].expandtabs(8)) + 1
    return quote_line(src, filename, diagnostic.file, diagnostic.line, column) or list(diagnostic.quote)


def describe():
    """One line for people: which NVRTC the check uses, or that it is skipped and why."""
    if not enabled():
        return f"skipped: turned off by ${ENV_VAR}"
    nvrtc = library()
    return f"{nvrtc.name} ({nvrtc.path})" if nvrtc else NOT_INSTALLED
