"""The compiler's resource report for each kernel, without a GPU: registers, shared memory, stack,
spills and barriers per kernel and architecture, read from ``nvcc -Xptxas -v``.

    rows = check_kernels([("reduction/05_unrolled.cu", {"BLOCK_DIM": 256}, ("reduce5<256>",))])
    print(format_table(rows))

Template kernels are only compiled once instantiated: for each name expression a line that takes
its address in host code is appended to a temporary copy of the source, which makes nvcc
instantiate it. The copy starts with a ``#line`` directive, so errors name the real file and line.

``pmpp check-kernels`` checks every variant for each GPU generation of :data:`pmpp.targets.ARCHS`
with ``keep_going=True``: a variant whose ``min_arch`` is newer than an arch gets a row saying
so, a file that does not compile gets a row with the compiler's first error, and the rest go on.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pmpp.errors import BackendUnavailableError, CompileError
from pmpp.source import define_options as define_flags

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
NVCC_TIMEOUT_S = 300
_INSTANTIATIONS = "<pmpp: template instantiations>"

# (path under kernels/, defines, name expressions[, min_arch: the sm_XY number the code needs, e.g. 90])
Target = tuple[str, Mapping[str, Any], Sequence[str]] | tuple[str, Mapping[str, Any], Sequence[str], int]
OK, NEEDS_NEWER, FAILED = "ok", "needs newer", "failed"      # a row's status

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")


def find_nvcc() -> str:
    """The nvcc on PATH, else in ``$CUDA_HOME/bin``; BackendUnavailableError if neither."""
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    raise BackendUnavailableError(
        "nvcc not found on PATH or in $CUDA_HOME/bin: install the CUDA toolkit (or set CUDA_HOME "
        "to where it is) to read the compiler's resource report")


def nvcc_available() -> bool:
    """Whether :func:`find_nvcc` finds nvcc (tests that need it skip otherwise)."""
    try:
        find_nvcc()
    except BackendUnavailableError:
        return False
    return True


def check_kernels(targets: Iterable[Target], archs: Sequence[str] | None = None, *,
                  kernels_dir: str | os.PathLike | None = None, keep_going: bool = False) -> list[dict]:
    """Compile every target for every arch (default: :data:`pmpp.targets.ARCHS`, sm_75 to sm_90)
    with ``nvcc -arch=<arch> -Xptxas -v -cubin`` and return one row per kernel and arch: file,
    kernel, arch, registers, shared_bytes, stack_bytes, spill_stores, spill_loads, barriers (None
    where this ptxas does not report them), defines, status (``"ok"``) and reason (None).

    A target whose ``min_arch`` is above an arch is not compiled for it: its row has status
    ``"needs newer"`` and reason ``"needs sm_90"``. A target that does not compile raises
    :class:`CompileError`, or with ``keep_going=True`` gets a row with status ``"failed"`` and the
    compiler's first error as reason (``error`` holds the exception), and the others go on."""
    if archs is None:
        from pmpp.targets import ARCHS as archs
    nvcc = find_nvcc()
    base = Path(kernels_dir) if kernels_dir is not None else _default_kernels_dir()
    jobs = [(t, arch) for t in targets for arch in archs]
    workers = max(1, min(len(jobs), os.cpu_count() or 1, 8))
    with ThreadPoolExecutor(workers) as pool:
        reports = list(pool.map(lambda job: _check(nvcc, base, job[0], job[1], keep_going), jobs))
    rows = [row for report in reports for row in report]
    _demangle_rows([r for r in rows if r["kernel"] is not None], nvcc)
    return rows


def arch_number(arch: str) -> int:
    """``"sm_75"`` -> 75, ``"sm_90a"`` -> 90."""
    digits = "".join(c for c in arch.split("_")[-1] if c.isdigit())
    if not digits:
        raise ValueError(f"not an arch: {arch!r}; name one as sm_XY, e.g. sm_75")
    return int(digits)


def _default_kernels_dir() -> Path:
    try:
        from pmpp.source import kernels_dir   # honours $PMPP_KERNELS
    except ImportError:
        return KERNELS_DIR
    return kernels_dir()


def _check(nvcc: str, base: Path, target: Target, arch: str, keep_going: bool) -> list[dict]:
    rel, defines = target[0], target[1]
    min_arch = target[3] if len(target) > 3 else 0
    if min_arch > arch_number(arch):
        return [_outcome_row(rel, defines, arch, NEEDS_NEWER, f"needs sm_{min_arch}")]
    try:
        return _compile(nvcc, base, target, arch, min_arch)
    except (CompileError, FileNotFoundError, subprocess.TimeoutExpired) as error:
        if not keep_going:
            raise
        reason = first_error_line(error).replace(f"{base.resolve()}{os.sep}", "")
        return [_outcome_row(rel, defines, arch, FAILED, reason, error=error)]


def _outcome_row(rel: str, defines: Mapping[str, Any], arch: str, status: str, reason: str, **extra) -> dict:
    """The row of a target that has no kernels to report for ``arch``: not compiled, or failed."""
    return dict(file=str(rel), kernel=None, arch=arch, registers=None, shared_bytes=None, stack_bytes=None,
                spill_stores=None, spill_loads=None, barriers=None, defines=_defines_text(defines),
                status=status, reason=reason, **extra)


def first_error_line(error: BaseException) -> str:
    """The line of a compile failure worth reading first: ``file:line: message``."""
    if isinstance(error, subprocess.TimeoutExpired):
        return f"nvcc took more than {NVCC_TIMEOUT_S} s"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _compile(nvcc: str, base: Path, target: Target, arch: str, min_arch: int = 0) -> list[dict]:
    rel, defines, names = target[:3]
    src = (base / rel).resolve()
    if not src.is_file():
        raise FileNotFoundError(f"no kernel file {src} (targets name paths under {base})")
    rows = _ptxas_report(nvcc, src.read_text(), str(src), _build_arch(arch, min_arch), defines, names, (src.parent,))
    return [dict(file=str(rel), **{**row, "arch": arch}, status=OK, reason=None) for row in rows]


def _build_arch(arch: str, min_arch: int) -> str:
    """A variant that needs Hopper (min_arch 90) is built for sm_90a on an sm_90 row: the
    arch-specific target that has wgmma and the other sm_90a-only instructions, as it runs."""
    return arch + "a" if min_arch >= 90 and arch == "sm_90" else arch


def check_source(text: str, arch: str = "sm_90", *, filename: str = "<source>",
                 defines: Mapping[str, Any] | None = None, name_expressions: Sequence[str] = (),
                 include_dirs: Sequence[str | os.PathLike] = ()) -> list[dict]:
    """The resource report of one source text (a kernel file as loaded, or a string) for one arch:
    rows as :func:`check_kernels` gives them, less ``file``. Errors name ``filename`` and its line."""
    nvcc = find_nvcc()
    rows = _ptxas_report(nvcc, text, filename, arch, defines or {}, tuple(name_expressions), include_dirs)
    _demangle_rows(rows, nvcc)
    return rows


def _ptxas_report(nvcc: str, text: str, filename: str, arch: str, defines: Mapping[str, Any],
                  names: Sequence[str], include_dirs: Sequence[str | os.PathLike]) -> list[dict]:
    """``nvcc -arch=<arch> -Xptxas -v -cubin`` on ``text`` (template instances added for ``names``):
    one row per kernel, names still mangled. A report is kept in the cache (see
    :func:`_report_cache`), so an unchanged kernel is not compiled again."""
    # the macros in name order: one report for one kernel however its defines were listed
    flags = [f"-arch={arch}", *(f"-I{d}" for d in include_dirs), *sorted(define_flags(defines))]
    cached = _report_cache(nvcc, text, names, flags, include_dirs)
    if cached is not None and cached.is_file():
        rows = json.loads(cached.read_text())
    else:
        rows = _compile_report(nvcc, text, filename, names, flags)
        _store(cached, rows)
    return [dict(defines=_defines_text(defines), **row) for row in rows]


def _compile_report(nvcc: str, text: str, filename: str, names: Sequence[str], flags: Sequence[str]) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="pmpp-cc-") as tmp:
        copy = Path(tmp) / (Path(filename).name if filename.endswith(".cu") else "kernel.cu")
        copy.write_text(_with_instantiations(text, filename, names))
        # -cubin: device code only; the host compile that -c adds would double the time
        cmd = [nvcc, "-Xptxas", "-v", "-cubin", str(copy), "-o", str(Path(tmp) / "k.cubin"), *flags]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise _name_expression_error(log, filename, names) or _compile_error(log, filename)
    return parse_ptxas(log)


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def _report_cache(nvcc: str, text: str, names: Sequence[str], flags: Sequence[str],
                  include_dirs: Sequence[str | os.PathLike]) -> Path | None:
    """Where the report of this compile is kept: ``$PMPP_CACHE_DIR/ptxas/<key>.json``, the key a
    digest of nvcc (path, size, time), the flags, the name expressions, the source and the
    ``#include "..."`` files it reaches. None where nvcc cannot be looked at."""
    try:
        tool = Path(nvcc).resolve().stat()
    except OSError:
        return None
    digest = hashlib.sha256(repr((str(Path(nvcc).resolve()), tool.st_size, tool.st_mtime_ns, list(flags),
                                  list(names))).encode())
    for part in _sources_reached(text, [Path(d) for d in include_dirs]):
        digest.update(part.encode())
    from pmpp.paths import cache_dir
    return cache_dir() / "ptxas" / f"{digest.hexdigest()[:32]}.json"


def _sources_reached(text: str, include_dirs: Sequence[Path]) -> Iterable[str]:
    """``text``, then the text of each local header it includes, and theirs (each once)."""
    seen: set[Path] = set()
    pending = [text]
    while pending:
        current = pending.pop()
        yield current
        for name in _LOCAL_INCLUDE.findall(current):
            found = next((d / name for d in include_dirs if (d / name).is_file()), None)
            if found is not None and found.resolve() not in seen:
                seen.add(found.resolve())
                pending.append(found.read_text(errors="replace"))


def _store(path: Path | None, rows: list[dict]) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        part.write_text(json.dumps(rows))
        part.replace(path)
    except OSError:
        pass                       # a cache that cannot be written is only slower


def _defines_text(defines: Mapping[str, Any]) -> str:
    return " ".join(f[2:] if f.startswith("-D") else f for f in define_flags(defines))


def instantiation_source(src: Path, names: Sequence[str]) -> str:
    """The source as nvcc should see it: a #line so errors name ``src``, then the file, then one
    host-side address-of per template name expression, e.g. ``&reduce5<256>``."""
    return _with_instantiations(src.read_text(), str(src), names)


def _with_instantiations(text: str, filename: str, names: Sequence[str]) -> str:
    escaped = filename.replace("\\", "/").replace('"', '\\"')
    lines = [f'#line 1 "{escaped}"', text.rstrip("\n"), f'#line 1 "{_INSTANTIATIONS}"']
    lines += [f"__attribute__((unused)) static void* pmpp_instantiate_{i} = (void*)&{name};"
              for i, name in enumerate(names)]
    return "\n".join(lines) + "\n"


def parse_ptxas(log: str) -> list[dict]:
    """Rows (mangled ``kernel``, ``arch``, resources) from the report of ``-Xptxas -v``."""
    rows: list[dict] = []
    current: dict | None = None
    props_for = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = {"kernel": m.group(1), "arch": m.group(2), "registers": None, "shared_bytes": 0,
                       "stack_bytes": None, "spill_stores": None, "spill_loads": None, "barriers": None}
            rows.append(current)
        elif m := _PROPS.search(line):
            props_for = m.group(1)
        elif (m := _STACK.search(line)) and current is not None and props_for == current["kernel"]:
            current["stack_bytes"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        elif (m := _USED.search(line)) and current is not None:
            current["registers"] = int(m.group(1))
            if b := _BARRIERS.search(line):
                current["barriers"] = int(b.group(1))
            if s := _SMEM.search(line):
                current["shared_bytes"] = int(s.group(1))
    return rows


def _demangle_rows(rows: list[dict], nvcc: str) -> None:
    mangled = sorted({r["kernel"] for r in rows if r["kernel"].startswith("_Z")})
    names = dict(zip(mangled, demangle(mangled, nvcc)))
    for r in rows:
        r["kernel"] = kernel_name(names.get(r["kernel"], r["kernel"]))


def demangle(symbols: Sequence[str], nvcc: str | None = None) -> list[str]:
    """Demangle with cu++filt (beside nvcc) or c++filt; symbols stay as they are without either."""
    candidates = [str(Path(nvcc).parent / "cu++filt")] if nvcc else []
    candidates += [shutil.which("cu++filt"), shutil.which("c++filt")]
    for tool in filter(None, candidates):
        if not Path(tool).is_file():
            continue
        try:
            out = subprocess.run([tool], input="\n".join(symbols) + "\n", capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        lines = out.stdout.splitlines()
        if out.returncode == 0 and len(lines) == len(symbols):
            return lines
    return list(symbols)


def kernel_name(demangled: str) -> str:
    """``"void reduce5<256u>(float const*, float*, unsigned int)"`` -> ``"reduce5<256u>"``."""
    s = demangled.strip()
    if s.endswith(")"):                      # drop the parameter list: the last balanced (...)
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    if s.startswith("void "):
        s = s[len("void "):]
    return s.strip()


def _name_expression_error(log: str, src: str | Path, names: Sequence[str]) -> CompileError | None:
    m = re.search(re.escape(_INSTANTIATIONS) + r"\((\d+)\): (?:\w+ )?error\b[^:]*: (.*)", log)
    if m is None or not 1 <= int(m.group(1)) <= len(names):
        return None
    name = names[int(m.group(1)) - 1]
    return CompileError(f"{src}: name expression {name!r} does not name a kernel in it ({m.group(2).strip()}); "
                        "give the template with its arguments, e.g. 'reduce5<256>'",
                        filename=str(src), log=log)


def _compile_error(log: str, filename: str) -> CompileError:
    try:
        from pmpp.source import compile_error
    except ImportError:
        compile_error = _local_compile_error
    return compile_error(log, filename)


_ERROR_LINE = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?:catastrophic )?error\b[^:]*: (?P<msg>.*)$", re.M)


def _local_compile_error(log: str, filename: str) -> CompileError:
    """A CompileError naming the first error's file and line (used while pmpp.source is absent)."""
    m = _ERROR_LINE.search(log)
    if m is None:
        return CompileError(f"{filename}: nvcc failed:\n{log.strip()}", filename=filename, log=log)
    where = m.group("file")
    return CompileError(f"{where}:{m.group('line')}: {m.group('msg').strip()}\n\n{log.strip()}",
                        filename=where, line=int(m.group("line")), log=log)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a plain-text table, one line per kernel and arch (and the reason where a
    target was not compiled for an arch, or failed)."""
    show_defines = any(r.get("defines") for r in rows)
    cols = [("file", "file"), ("kernel", "kernel")] + ([("defines", "defines")] if show_defines else [])
    cols += [("arch", "arch"), ("registers", "regs"), ("shared_bytes", "smem B"), ("stack_bytes", "stack B"),
             ("spill_stores", "spill st B"), ("spill_loads", "spill ld B"), ("barriers", "barriers")]
    cols += [("reason", "note")] if any(r.get("reason") for r in rows) else []
    table = [[h for _, h in cols]] + [["-" if r.get(k) is None else str(r.get(k)) for k, _ in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    numeric = [k not in ("file", "kernel", "defines", "arch", "reason") for k, _ in cols]
    fmt = lambda row: "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(row, widths, numeric))
    lines = [fmt(table[0]), "  ".join("-" * w for w in widths)] + [fmt(row) for row in table[1:]]
    return "\n".join(line.rstrip() for line in lines)


def format_arch_table(rows: Sequence[Mapping[str, Any]], archs: Sequence[str]) -> str:
    """The rows of :func:`check_kernels` as one table, a line per kernel and a column per arch:
    registers per thread, static shared bytes and spills, or why there is nothing to report for
    that arch ("needs sm_90", or "FAILED [k]" with the compiler's first error below the table)."""
    lines, failures = _arch_grid(rows, archs)
    header = ["file", "kernel", *archs]
    table = [header] + lines
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
    out = [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(row) for row in lines]
    out += [f"[{k}] {r['file']} ({r['arch']}): {r['reason']}" for k, r in enumerate(failures, 1)]
    out.append("cells: registers per thread (r), static __shared__ bytes (B), spill stores+loads in bytes")
    return "\n".join(out)


def _arch_grid(rows: Sequence[Mapping[str, Any]], archs: Sequence[str]) -> tuple[list[list[str]], list]:
    """(table lines, failure rows in footnote order). A target's "needs"/"failed" outcome fills
    the arch's cell of each of its kernels (a line with kernel "-" where no arch compiled it)."""
    kernels: dict[tuple, list[str]] = {}      # (file, defines) -> kernel names, first seen first
    cells: dict[tuple, dict[str, str]] = {}   # (file, defines, kernel) -> {arch: cell}
    outcomes: dict[tuple, dict[str, str]] = {}
    failures: list = []
    for r in rows:
        target = (r["file"], r.get("defines", ""))
        names = kernels.setdefault(target, [])
        if r["kernel"] is None:
            if r.get("status") == FAILED:
                failures.append(r)
                outcomes.setdefault(target, {})[r["arch"]] = f"FAILED [{len(failures)}]"
            else:
                outcomes.setdefault(target, {})[r["arch"]] = r["reason"]
            continue
        if r["kernel"] not in names:
            names.append(r["kernel"])
        cells.setdefault((*target, r["kernel"]), {})[r["arch"]] = _resource_cell(r)
    lines = []
    for target, names in kernels.items():
        for name in names or ["-"]:
            got = {**outcomes.get(target, {}), **cells.get((*target, name), {})}
            lines.append([target[0], name, *(got.get(arch, "") for arch in archs)])
    return lines, failures


def _resource_cell(r: Mapping[str, Any]) -> str:
    cell = f"{'-' if r['registers'] is None else r['registers']} r {r['shared_bytes']} B"
    spilled = (r.get("spill_stores") or 0) + (r.get("spill_loads") or 0)
    return cell + (f" spill {r['spill_stores']}+{r['spill_loads']} B" if spilled else "")


def arch_summary(rows: Sequence[Mapping[str, Any]], archs: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per arch, how many targets (file and defines) compiled, need a newer GPU, or failed:
    ``{"sm_75": {"ok": 85, "needs newer": 3, "failed": 0}}``."""
    status: dict[tuple, str] = {}
    for r in rows:
        status.setdefault((r["file"], r.get("defines", ""), r["arch"]), r.get("status", OK))
    return {arch: {s: sum(1 for (_, _, a), v in status.items() if a == arch and v == s)
                   for s in (OK, NEEDS_NEWER, FAILED)} for arch in archs}


# ---------------------------------------------------------------------------------------------
# SASS listings: what the GPU will execute

_ENCODING = re.compile(r"\s*/\* 0x[0-9a-f]{16} \*/")


def find_cuobjdump() -> str:
    """cuobjdump on PATH, in ``$CUDA_HOME/bin``, or from the ``nvidia-cuda-cuobjdump`` wheel
    (``nvidia/cu*/bin/cuobjdump``); BackendUnavailableError if none."""
    found = _find_cuda_tool("cuobjdump", "nvidia-cuda-cuobjdump")
    if found is None:
        raise BackendUnavailableError(
            "cuobjdump not found on PATH, in $CUDA_HOME/bin or in the nvidia-cuda-cuobjdump wheel: "
            "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (or install the CUDA toolkit) "
            "to read SASS")
    return found


def sass(path: str | os.PathLike, *, defines: Mapping[str, Any] | None = None,
         name_expressions: Sequence[str] = (), arch: str = "sm_90") -> str:
    """The SASS of a kernel file (under ``kernels/``, or a path): compiled with ``nvcc -cubin`` for
    ``arch`` and listed by ``cuobjdump -sass``, one instruction a line (the hex encodings dropped).
    Templates are instantiated for ``name_expressions`` as in :func:`check_kernels`."""
    nvcc, cuobjdump = find_nvcc(), find_cuobjdump()
    src = (_default_kernels_dir() / path).resolve()
    if not src.is_file():
        raise FileNotFoundError(f"no kernel file {src}")
    env = dict(os.environ)
    nvdisasm = _find_cuda_tool("nvdisasm", "nvidia-cuda-nvdisasm")    # cuobjdump -sass runs it
    if nvdisasm is not None:
        env["NVDISASM_PATH"] = nvdisasm
    with tempfile.TemporaryDirectory(prefix="pmpp-sass-") as tmp:
        copy, cubin = Path(tmp) / src.name, Path(tmp) / "k.cubin"
        copy.write_text(instantiation_source(src, name_expressions))
        proc = subprocess.run([nvcc, f"-arch={arch}", "-cubin", str(copy), "-o", str(cubin), f"-I{src.parent}",
                               *define_flags(defines or {})], capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        if proc.returncode != 0:
            log = proc.stdout + proc.stderr
            raise _name_expression_error(log, src, name_expressions) or _compile_error(log, str(src))
        dump = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True,
                              timeout=NVCC_TIMEOUT_S, env=env)
    if dump.returncode != 0:
        raise BackendUnavailableError(f"cuobjdump -sass failed: {(dump.stderr or dump.stdout).strip()} "
                                      "(it needs nvdisasm: pip install nvidia-cuda-nvdisasm)")
    lines = (_ENCODING.sub("", line).rstrip() for line in dump.stdout.splitlines())
    return "\n".join(line for line in lines if line.strip()) + "\n"


def _find_cuda_tool(name: str, wheel: str) -> str | None:
    """A CUDA tool on PATH, in $CUDA_HOME/bin (or $CUDA_PATH/bin), or in the NVIDIA wheel that ships it."""
    found = shutil.which(name)
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / name).is_file():
            return str(Path(home) / "bin" / name)
    try:
        files = metadata.distribution(wheel).files or ()
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == name and file.parent.name == "bin" and file.parts[0] == "nvidia":
            located = Path(file.locate())
            if located.is_file():
                return str(located)
    return None
