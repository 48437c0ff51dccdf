"""The CPU engine's toolchain: find the C++ compiler (g++ or clang, see :class:`Compiler`) and
Boost.Context, build the runtime library once, and compile kernel modules into a disk cache.

Cache layout (``$PMPP_CACHE_DIR/cpu`` or ``~/.cache/pmpp/cpu``): ``libpmpp_cpu_rt-<key>.so``
(``.dylib`` on macOS; the runtime, keyed by its sources and the compiler), ``mod-<key>.so`` (a
module, keyed by its prepared source, options, compiler, runtime and check flag) with
``mod-<key>.deps.json`` (hashes of the user headers it included). Files are written to a
temporary name and renamed, so several processes can share the cache.

Kernel code is compiled under limits (:class:`CompileLimits`): the compiler runs in a process group
of its own with standard input from /dev/null, limits on CPU time, memory and file size, and a
wall-clock timeout that stops the whole group; ``#include`` of device and system files (/dev,
/proc, /sys, pipes) is refused before g++ starts.
"""

import difflib
import functools
import hashlib
import itertools
import json
import os
import re
import resource
import select
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pmpp.errors import BackendUnavailableError, CompileError

import pmpp.backends.cpu.source as _source
import pmpp.paths as _paths

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
RUNTIME_SOURCE = HERE / "runtime" / "pmpp_runtime.cpp"
ENGINE_VERSION = "1"  # bump when generated code or flags change
DEBUG_PREFIX = "/pmpp-build"  # what the cache directory is called in debug info

PLAIN_FLAGS = ["-O2"]
# CUDA's forward progress: a loop without side effects may be infinite (a thread spinning on memory
# that nothing changes hangs on a GPU, and must reach the launch's time limit here too); C++ lets
# the compiler assume such a loop ends and delete it (g++ from -O2, clang at any level).
FORWARD_PROGRESS_FLAGS = ["-fno-finite-loops"]
# Every load/store of kernel code that may touch shared data becomes a call
# __tsan_{read,write}N(addr), which the runtime defines: the object is compiled with the compiler's
# ThreadSanitizer instrumentation and linked WITHOUT its runtime library (see
# runtime/pmpp_runtime.cpp for why not AddressSanitizer's). -gdwarf-4, with g++ and clang alike:
# lines.py reads DWARF 4 and 5, but binutils 2.40's addr2line misreads g++ 12's DWARF 5 file table
# (it names the generated .cpp instead of the #line file), and 4 keeps modules readable by it.
CHECK_FLAGS = ["-O1", "-g", "-gdwarf-4", "-DPMPP_CHECK=1", "-fsanitize=thread"]
# ThreadSanitizer's settings (g++ takes them as --param, clang as LLVM options): no calls at
# function entry and exit; volatile accesses call __tsan_volatile_{read,write}N, because blocks pass
# values to each other through them (look-back scans), so they never count as a race between blocks.
TSAN_SETTINGS = ["tsan-instrument-func-entry-exit=0", "tsan-distinguish-volatile=1"]
# clang's own: a read followed by a write of the same address in one basic block is reported too
# (clang leaves it out by default: `*sum += x` would be a write alone, and a count build would
# miss the load), as g++ does. clang copies a float4 with memcpy, which becomes __tsan_memcpy: the
# runtime checks and counts it as one 16-byte access, as g++'s __tsan_read16/__tsan_write16.
CLANG_TSAN_SETTINGS = TSAN_SETTINGS + ["tsan-instrument-read-before-write=1"]
# zig's clang makes -O2 of every -O1 to -O3 (with loops unrolled at run-time trip counts and
# vectorized: a warp's lanes would run different copies of one access); -Xclang -O1 gives clang's
# own -O1, as g++'s, for the checked and count builds.
CLANG_CHECK_FLAGS = ["-Xclang", "-O1"]
# Count builds (pmpp.counters): the checked build, plus a call to __sanitizer_cov_trace_pc() at the
# start of every basic block (which lanes execute it). g++: -fsanitize-coverage=trace-pc, and no
# scalar replacement of aggregates (-fno-tree-sra), so that a float4 or int2 copied whole stays one
# 16- or 8-byte access as on the GPU instead of becoming four or two 4-byte ones. clang: "bb" makes
# it one call per basic block as g++ does (its default is one per edge), and no block is left out
# for being implied by another (sanitizer-coverage-prune-blocks).
COUNT_FLAGS = {
    "gcc": ["-DPMPP_COUNT=1", "-fno-tree-sra", "-fsanitize-coverage=trace-pc"],
    "clang": ["-DPMPP_COUNT=1", "-fsanitize-coverage=bb,trace-pc", "-mllvm", "-sanitizer-coverage-prune-blocks=0"],
}
# -ffp-contract=off: no fused multiply-adds made from a*b+c (clang makes them by default; g++ does
# not under -std=c++NN). -UNDEBUG: zig's clang defines NDEBUG from -O1 on, which would take
# device-side assert() out (a kernel's own -DNDEBUG comes after it and still does).
COMMON_FLAGS = ["-fPIC", "-fno-strict-aliasing", "-ffp-contract=off", "-UNDEBUG", "-Wno-unknown-pragmas",
                "-pthread"]
# -fno-gnu-unique: separately dlopen'ed modules would otherwise share g++'s STB_GNU_UNIQUE
# symbols (template statics) and crash when one of them is unloaded or differs (clang makes none).
GCC_ONLY_FLAGS = ["-fno-gnu-unique"]

_INSTALL_HINT = ("install a C++ compiler (Debian/Ubuntu: apt install g++; conda: conda install "
                 "gxx_linux-64) and Boost.Context (pip install cmeel-boost)")


def cache_dir():
    return _paths.cache_dir("cpu")


@dataclass(frozen=True)
class Compiler:
    """A C++ compiler as the engine runs it. ``command``: the program and its arguments
    ($PMPP_CXX, shlex-split), with the target's flag when one was asked for; ``family``: "gcc",
    "clang" or "apple-clang"; ``version``: the first line of ``--version``; ``target``: the machine
    it compiles for; ``macos``: whether it makes Mach-O (.dylib) rather than ELF (.so) libraries;
    ``cross``: whether the target was chosen (then the host's Boost library is not linked);
    ``macros``: a digest of the macros it predefines, which name the CPU features it compiles for
    (zig's clang compiles for the build machine's own CPU)."""
    command: tuple
    family: str
    version: str
    target: str
    macos: bool
    cross: bool = False
    macros: str = ""

    @property
    def name(self):
        """What messages call it."""
        return "g++" if self.family == "gcc" else "clang++"

    @property
    def identity(self):
        """What a build's cache key takes from the compiler."""
        return self.family, self.version, self.target, self.macros

    @property
    def library_suffix(self):
        return ".dylib" if self.macos else ".so"

    def mode_flags(self, check, count):
        """The flags of a plain, checked (``check``) or count (``count``) build of kernel code."""
        if not (check or count):
            return PLAIN_FLAGS + FORWARD_PROGRESS_FLAGS
        if self.family == "gcc":
            tsan = [flag for setting in TSAN_SETTINGS for flag in ("--param", setting)]
            return CHECK_FLAGS + FORWARD_PROGRESS_FLAGS + tsan + (COUNT_FLAGS["gcc"] if count else [])
        tsan = [flag for setting in CLANG_TSAN_SETTINGS for flag in ("-mllvm", f"-{setting}")]
        return (CHECK_FLAGS + CLANG_CHECK_FLAGS + FORWARD_PROGRESS_FLAGS + tsan
                + (COUNT_FLAGS["clang"] if count else []))

    def common_flags(self):
        return COMMON_FLAGS + (GCC_ONLY_FLAGS if self.family == "gcc" else [])

    def shared_library_flags(self, name):
        """Link flags of a shared library installed as ``name`` in a directory on the rpath."""
        if self.macos:
            return ["-shared", f"-Wl,-install_name,@rpath/{name}"]
        return ["-shared", f"-Wl,-soname,{name}"]

    def module_link_flags(self):
        """Link flags of a kernel module: a symbol no library defines is an error (Apple's linker
        makes it one anyway), and the math library is linked (clang++ with libc++ would not)."""
        return [] if self.macos else ["-Wl,-z,defs", "-lm"]


def compiler():
    """(program, version line) of the C++ compiler; :func:`cxx` has the whole command."""
    cc = cxx()
    return cc.command[0], cc.version


def cxx(target=None):
    """The C++ compiler ($PMPP_CXX, a command with arguments if need be, default g++), for
    ``target`` (a clang target such as "aarch64-macos", for cross-compiling; default: the host)."""
    return _compiler(os.environ.get("PMPP_CXX", "").strip(), target)


@functools.lru_cache(maxsize=None)
def _compiler(setting, target):
    command = shlex.split(setting) if setting else [shutil.which("g++") or "g++"]
    if not setting and not shutil.which("g++"):
        raise BackendUnavailableError(f"pmpp's CPU engine needs a C++ compiler, and g++ was not found: "
                                      f"{_INSTALL_HINT}, or set $PMPP_CXX to one")
    family = _family(tuple(command), setting)
    if target and family == "gcc":
        raise BackendUnavailableError(f"g++ compiles for its own machine only, not for {target}: set "
                                      f"$PMPP_CXX to a clang (e.g. \"python -m ziglang c++\") to cross-compile")
    if target:
        command = [*command, f"--target={target}"]
    about, macros = _run_compiler(command, ["--version"]), _predefined_macros(tuple(command))
    return Compiler(command=tuple(command), family=family, version=_first_line(about),
                    target=_target(command, about), macos="__APPLE__" in macros, cross=bool(target),
                    macros=_digest(*sorted(macros.items()))[:16])


def _family(command, setting):
    """"gcc", "clang" or "apple-clang", from the macros the compiler predefines."""
    macros = _predefined_macros(command)
    if "__apple_build_version__" in macros:
        return "apple-clang"
    if "__clang__" in macros:
        return "clang"
    if "__GNUC__" in macros:
        return "gcc"
    version = _first_line(_run_compiler(command, ["--version"]))
    raise BackendUnavailableError(f"pmpp's CPU engine needs g++ or clang, and $PMPP_CXX={setting!r} is "
                                  f"neither ({version}): {_INSTALL_HINT}")


def _first_line(text):
    return (text.strip().splitlines() or ["(no version)"])[0].strip()


def _run_compiler(command, args):
    """Standard output of the compiler run with ``args``; BackendUnavailableError if it fails."""
    try:
        # in a folder of its own: zig's `c++ --target=aarch64-macos --version` writes an a.o
        with tempfile.TemporaryDirectory(prefix="pmpp-cxx-") as scratch:
            return subprocess.run([*command, *args], input="", capture_output=True, text=True, check=True,
                                  timeout=600, cwd=scratch).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        raise BackendUnavailableError(f"pmpp's CPU engine cannot run {shlex.join(command)}: {detail}; "
                                      f"{_INSTALL_HINT}") from exc


@functools.lru_cache(maxsize=None)
def _predefined_macros(command):
    """{name: definition} of the macros compiler ``command`` (a tuple) predefines for C++."""
    out = _run_compiler(command, ["-x", "c++", "-dM", "-E", "-"])
    return dict((line.split(None, 2)[1:] + [""])[:2] for line in out.splitlines() if line.startswith("#define "))


def _target(command, about):
    """The compiler's target machine: the "Target:" line of clang's --version (``about``; zig's
    -dumpmachine names musl for a glibc build), else g++'s -dumpmachine."""
    m = re.search(r"^Target: (\S+)", about, re.M)
    return m.group(1) if m else _run_compiler(command, ["-dumpmachine"]).strip()


_BOOST_LIBRARIES = ("libboost_context.so*", "libboost_context*.dylib")


@functools.lru_cache(maxsize=None)
def boost():
    """(include dir or None for the system's, library dir or None) of Boost.Context."""
    try:
        prefix = Path(metadata.distribution("cmeel-boost").locate_file("cmeel.prefix"))
        inc, lib = prefix / "include", prefix / "lib"
        if (inc / "boost/context/detail/fcontext.hpp").exists() and any(
                any(lib.glob(pattern)) for pattern in _BOOST_LIBRARIES):
            return str(inc), str(lib)
    except metadata.PackageNotFoundError:
        pass
    for inc in ("/usr/include", "/usr/local/include"):
        if Path(inc, "boost/context/detail/fcontext.hpp").exists():
            return None, None
    raise BackendUnavailableError(
        "pmpp's CPU engine needs Boost.Context for its fibers, which was not found: pip install "
        "cmeel-boost (or apt install libboost-context-dev)")


def _digest(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _engine_digest():
    files = sorted(f for f in INCLUDE_DIR.rglob("*") if f.is_file()) + [RUNTIME_SOURCE, Path(_source.__file__)]
    # A build's debug information names the engine's headers by absolute path, and its source
    # lines are read through them: a build made by another copy of pmpp (a student release beside
    # the workbook, sharing PMPP_CACHE_DIR) is not reused.
    return _digest(ENGINE_VERSION, INCLUDE_DIR.resolve(), *(f.name.encode() + f.read_bytes() for f in files))


def _tmp_name(final):
    return final.with_name(f".{final.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def runtime_library(target=None):
    """Path of the runtime library (built on first use, then cached), for the host or for
    ``target`` (see :func:`cxx`)."""
    return _runtime_library(cxx(target))


def runtime_path(target=None):
    """Where the runtime library for ``target`` is (or will be) cached: its name holds a digest of
    the engine, the compiler and Boost, so that another compiler gets a runtime of its own."""
    return _runtime_path(cxx(target))


def _runtime_path(cc):
    inc, lib = boost()
    key = _digest(_engine_digest(), *cc.identity, cc.cross, inc, lib)[:16]
    return cache_dir() / f"libpmpp_cpu_rt-{key}{cc.library_suffix}"


@functools.lru_cache(maxsize=None)
def _runtime_library(cc):
    out = _runtime_path(cc)
    if out.exists():
        return out
    with _paths.building(out.with_suffix("")):
        if not out.exists():
            inc, lib = boost()
            _build_runtime(cc, inc, lib, out)
    return out


def _build_runtime(cc, inc, lib, out):
    tmp = _tmp_name(out)
    cmd = [*cc.command, "-std=c++17", "-O2", *cc.common_flags(), "-iquote", str(INCLUDE_DIR)]
    if inc:
        cmd += ["-isystem", inc]
    cmd += [str(RUNTIME_SOURCE), "-o", str(tmp), *cc.shared_library_flags(out.name), *_boost_link_flags(cc, lib)]
    if not cc.macos:
        cmd += ["-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BackendUnavailableError(
            f"pmpp's CPU engine could not build its runtime library ({_INSTALL_HINT}):\n"
            f"{shlex.join(cmd)}\n{proc.stderr}")
    os.replace(tmp, out)


def _boost_link_flags(cc, lib):
    """How the runtime links Boost.Context (``lib``: its directory, None for the system's). A
    cross-compiled runtime cannot link the host's library: its make_fcontext and jump_fcontext are
    left to be found when it is loaded (Mach-O needs -undefined dynamic_lookup for that)."""
    if cc.cross:
        return ["-Wl,-undefined,dynamic_lookup"] if cc.macos else []
    return [*(["-L", lib, f"-Wl,-rpath,{lib}"] if lib else []), "-lboost_context"]


def translate_options(options):
    """NVRTC-style options -> g++ flags: -D, -U, -I and -std pass, GPU-only ones are dropped."""
    flags, std = [], "c++17"
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = str(opts[i])
        i += 1
        for short, long in (("-D", "--define-macro"), ("-U", "--undefine-macro"), ("-I", "--include-path")):
            value = None
            if opt in (short, long) and i < len(opts):
                value, i = str(opts[i]), i + 1
            elif opt.startswith(long + "="):
                value = opt[len(long) + 1:]
            elif opt.startswith(short) and len(opt) > 2:
                value = opt[2:]
            if value is not None:
                if short == "-I":
                    value = os.path.abspath(value)
                flags.append(short + value)
                break
        else:
            m = re.fullmatch(r"--?std=(?:c|gnu)\+\+(\d+)", opt)
            if m:
                std = "c++17" if m.group(1) in ("98", "03", "0x", "11", "14") else f"c++{m.group(1)}"
            # everything else (-arch=..., --use_fast_math, -lineinfo, -G, ...) is for the GPU
    return [f"-std={std}", *flags]


def user_macros(flags):
    """The text of the header that gives kernel code the -D and -U options of ``flags``, or "" when
    there are none. It is force-included after the prelude, so that a user's macro (a stencil
    radius R, a tile size T) never reaches the engine's own code, as NVRTC keeps it out of CUDA's
    headers; each option means what it means on g++'s command line (-DN: 1, -DN=: empty)."""
    directives = []
    for flag in flags:
        name, has_value, value = flag[2:].partition("=")
        if flag.startswith("-U"):
            directives.append(f"#undef {name}")
        elif flag.startswith("-D"):
            definition = (value.splitlines() or [""])[0] if has_value else "1"
            directives.append(f"#define {name} {definition}".rstrip())
    if not directives:
        return ""
    names = {d.split()[1].partition("(")[0] for d in directives}
    reread = ["#include <pmpp_assert.h>"] if "NDEBUG" in names else []   # assert() follows NDEBUG
    return "\n".join(['#line 1 "<command-line>"', *directives, *reread]) + "\n"


def macros_after_prelude(flags, out_dir, stem):
    """(``flags`` without their -D and -U options, the options that give those to kernel code
    instead, the header written for them or None). The options are an ``-include`` of
    ``out_dir``/``stem``.macros.h (see :func:`user_macros`): put them after the prelude's."""
    rest = [flag for flag in flags if not flag.startswith(("-D", "-U"))]
    macros = user_macros(flags)
    if not macros:
        return rest, [], None
    header = Path(out_dir) / f"{stem}.macros.h"
    tmp = _tmp_name(header)
    tmp.write_text(macros)
    os.replace(tmp, header)
    return rest, ["-include", str(header)], header


def _dependencies(dep_file, *generated):
    """{path: sha256} of the user headers a compile read (from g++ -MMD), other than the engine's
    and the ``generated`` files (the module's source and macros; None stands for none)."""
    skipped = {Path(g) for g in generated if g}
    try:
        text = Path(dep_file).read_text()
    except OSError:
        return {}
    text = text.replace("\\\n", " ")
    _, _, deps = text.partition(":")
    paths = {}
    for path in re.split(r"(?<!\\)\s+", deps.strip()):
        path = path.replace("\\ ", " ")
        if not path or Path(path) in skipped or Path(path).parent == INCLUDE_DIR:
            continue
        try:
            paths[os.path.abspath(path)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            pass
    return paths


def _deps_current(deps_json):
    try:
        deps = json.loads(Path(deps_json).read_text())
    except (OSError, ValueError):
        return False
    for path, digest in deps.items():
        try:
            if hashlib.sha256(Path(path).read_bytes()).hexdigest() != digest:
                return False
        except OSError:
            return False
    return True


# What the device-code checks said of each module built in this process (a devicecheck.Verdict,
# whose .nvrtc tells whether NVRTC passed it or why it was skipped), by library path.
DEVICE_CHECKS = {}


def device_check(library_path):
    """The device-code checks' verdict on the module at ``library_path`` (see DEVICE_CHECKS)."""
    return DEVICE_CHECKS.get(str(library_path))


def build_module(src, *, filename, options, names, n_kernel_names, check, count=False, target=None):
    """Path of the compiled module for ``src`` (from the cache when possible): a plain, checked
    (``check``) or count (``count``) build, for the host or for ``target`` (see :func:`cxx`)."""
    cc = cxx(target)
    runtime = runtime_library(target)
    flags = translate_options(options)
    prepared = _source.rewrite(src, filename) + _source.kernel_table(names)
    mode_flags = cc.mode_flags(check, count)
    key = _digest(_engine_digest(), *cc.identity, runtime.name, prepared, *flags, *mode_flags,
                  *cc.common_flags(), check, count)[:32]
    out_dir = cache_dir()
    so = out_dir / f"mod-{key}{cc.library_suffix}"
    deps_json = out_dir / f"mod-{key}.deps.json"
    from .devicecheck import refuse_host_calls   # before the cache: see devicecheck.py
    DEVICE_CHECKS[str(so)] = refuse_host_calls(src, prepared, filename, flags, out_dir, options,
                                               names[n_kernel_names:])
    if so.exists() and _deps_current(deps_json):
        return so
    with _paths.building(out_dir / f"mod-{key}"):
        if so.exists() and _deps_current(deps_json):
            return so   # another process built it while this one waited
        refuse_special_includes(src, filename, out_dir, _include_dirs(flags))
        cpp = out_dir / f"mod-{key}.cpp"
        tmp_cpp = _tmp_name(cpp)
        tmp_cpp.write_text(prepared)
        os.replace(tmp_cpp, cpp)
        other_flags, macro_include, macros_h = macros_after_prelude(flags, out_dir, f"mod-{key}")
        tmp_so, tmp_dep = _tmp_name(so), _tmp_name(out_dir / f"mod-{key}.d")
        obj = out_dir / f"mod-{key}.o"
        tmp_obj = _tmp_name(obj)
        # Compile and link separately: the compiler would add its ThreadSanitizer runtime to a
        # -fsanitize=thread link.
        compile_cmd = [*cc.command, *cc.common_flags(), *mode_flags, *other_flags, "-c",
                       f"-fdebug-prefix-map={out_dir}={DEBUG_PREFIX}",
                       "-I", str(INCLUDE_DIR), "-include", "pmpp_cuda.h", *macro_include,
                       "-MMD", "-MF", str(tmp_dep), "-x", "c++", str(cpp), "-o", str(tmp_obj)]
        # Apple's linker leaves the debug information in the object file (the library names it), so
        # on macOS the object is kept beside the library under its final name.
        linked_obj = obj if cc.macos else tmp_obj
        link_cmd = [*cc.command, *cc.common_flags(), "-shared", str(linked_obj), "-o", str(tmp_so),
                    str(runtime), f"-Wl,-rpath,{runtime.parent}", *cc.module_link_flags()]
        try:
            status, log = run_limited(compile_cmd, out_dir, filename)
            if status == 0:
                if cc.macos:
                    os.replace(tmp_obj, obj)
                status, log = run_limited(link_cmd, out_dir, filename)
            if status != 0:
                raise compile_error(log, filename, names, n_kernel_names, src)
        except BaseException:
            tmp_so.unlink(missing_ok=True)
            tmp_dep.unlink(missing_ok=True)
            raise
        finally:
            tmp_obj.unlink(missing_ok=True)
        deps = _dependencies(tmp_dep, cpp, macros_h)
        tmp_dep.unlink(missing_ok=True)
        tmp_json = _tmp_name(deps_json)
        tmp_json.write_text(json.dumps(deps))
        os.replace(tmp_json, deps_json)
        os.replace(tmp_so, so)
    return so


# ---- compiling under limits --------------------------------------------------------------------

@dataclass(frozen=True)
class CompileLimits:
    """What one g++ run on kernel code may use: ``wall_seconds`` before it is stopped,
    ``cpu_seconds`` of CPU per process, ``memory`` (bytes of address space per process) and
    ``file_size`` (bytes of the largest file it may write, its log included)."""
    wall_seconds: float = 120
    cpu_seconds: int = 60
    memory: int = 4 << 30
    file_size: int = 1 << 30

    @classmethod
    def from_environment(cls):
        """The defaults, overridden by $PMPP_COMPILE_TIMEOUT and $PMPP_COMPILE_CPU (seconds),
        $PMPP_COMPILE_MEMORY_MB and $PMPP_COMPILE_FILE_MB."""
        return cls(wall_seconds=_setting("PMPP_COMPILE_TIMEOUT", cls.wall_seconds),
                   cpu_seconds=max(1, round(_setting("PMPP_COMPILE_CPU", cls.cpu_seconds))),
                   memory=int(_setting("PMPP_COMPILE_MEMORY_MB", cls.memory >> 20)) << 20,
                   file_size=int(_setting("PMPP_COMPILE_FILE_MB", cls.file_size >> 20)) << 20)


def _setting(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"${name} must be a positive number, not {text!r}: set it to one or unset it")
    return value


_LOG_READ = 4 << 20   # of g++'s output, read back for the message


def run_limited(cmd, cwd, filename, limits=None, tool=None):
    """(exit status, output) of g++ command ``cmd`` run on kernel code under ``limits`` (default:
    from the environment), in a process group of its own with standard input from /dev/null.
    Raises CompileError, naming ``filename``, when it is stopped by the timeout or a limit."""
    limits = limits or CompileLimits.from_environment()
    # The output goes to a file, not a pipe, so that RLIMIT_FSIZE bounds it as well.
    with tempfile.TemporaryFile(dir=cwd) as out:
        status = _run_group(cmd, cwd, out, limits)
        out.seek(0)
        log = out.read(_LOG_READ).decode(errors="replace")
    stopped = _limit_reached(status, log, limits, filename, tool)
    if stopped:
        raise CompileError(stopped, filename=filename, log=log)
    return status, log


def _run_group(cmd, cwd, out, limits):
    """Exit status of ``cmd``, run as a process group of its own under ``limits`` with its output
    to file ``out``, or None when it ran out of time. No process of the group outlives the call."""
    # The child writes its pid (the group's id) to ``alive`` before g++ starts, and every process
    # of the group inherits the write end: it reads end-of-file once all of them have exited.
    alive, alive_w = os.pipe()
    try:
        return subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              pass_fds=(alive_w,), start_new_session=True, timeout=limits.wall_seconds,
                              preexec_fn=functools.partial(_enter_limits, limits, alive_w)).returncode
    except subprocess.TimeoutExpired:
        return None   # the driver is killed; its cc1plus and as are not
    finally:
        os.close(alive_w)
        _stop_group(alive)


def _enter_limits(limits, alive_w):
    """In the child, before g++ starts (its cc1plus and as inherit the limits). The CPU limit's
    soft part sends SIGXCPU, which g++ reports by name; the hard one a second later kills."""
    os.write(alive_w, os.getpid().to_bytes(8, "little"))
    for which, soft, hard in ((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
                              (resource.RLIMIT_AS, limits.memory, limits.memory),
                              (resource.RLIMIT_FSIZE, limits.file_size, limits.file_size),
                              (resource.RLIMIT_CORE, 0, 0)):
        try:
            outer = resource.getrlimit(which)[1]
            if outer != resource.RLIM_INFINITY:   # a lower hard limit set from outside stays
                soft, hard = min(soft, outer), min(hard, outer)
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass   # e.g. RLIMIT_AS on macOS: the other limits still hold


def _stop_group(alive, wait_s=5):
    """Kill what is left of the process group whose pid and liveness ``alive`` carries, and wait
    (at most ``wait_s``) until every process of it has exited; close ``alive``."""
    try:
        group = int.from_bytes(os.read(alive, 8), "little")
        still_running = not select.select([alive], [], [], 0)[0]   # then the group id is still taken
        if group and still_running:
            os.killpg(group, signal.SIGKILL)
            select.select([alive], [], [], wait_s)
    except (ProcessLookupError, PermissionError):
        pass   # the group ended meanwhile
    finally:
        os.close(alive)


def _size(nbytes):
    return f"{nbytes / (1 << 30):g} GiB" if nbytes >= 1 << 30 else f"{nbytes >> 20} MiB"


# g++'s own lines (never a quote of the student's code, which starts with a line number and "|")
_OUT_OF_MEMORY = re.compile(r"^(?:[\w+.-]+: )?(?:out of memory allocating|virtual memory exhausted)"
                            r"|^terminate called after throwing an instance of 'std::bad_alloc'", re.M)
_TOOL_KILLED = re.compile(r"^[\w+.-]+: (?:fatal error|internal compiler error): .*?"
                          r"(?P<why>CPU time limit exceeded|File size limit exceeded|Killed)", re.M)


def _limit_reached(status, log, limits, filename, tool=None):
    """What stopped the compiler (``tool``, default the C++ compiler), in words for the student, or
    None when it ran to its end."""
    if status == 0:
        return None
    cc = tool or cxx().name
    killed = _TOOL_KILLED.search(log)
    why = killed.group("why") if killed else None
    if status is None:
        return (f"{cc} did not finish compiling {filename} within {limits.wall_seconds:g} s (an #include "
                f"of a device file such as /dev/zero, or a template or constexpr that never ends?) "
                f"and was stopped. Look for such code; if the code is right and only slow to compile, "
                f"raise $PMPP_COMPILE_TIMEOUT (seconds).")
    if _OUT_OF_MEMORY.search(log):
        return (f"{cc} ran out of memory compiling {filename} (limit {_size(limits.memory)}: an #include of "
                f"a device file such as /dev/zero, or templates or constexpr values that grow without "
                f"end?) and was stopped. Look for such code; if the code is right, raise "
                f"$PMPP_COMPILE_MEMORY_MB.")
    if why == "CPU time limit exceeded" or status == -signal.SIGXCPU:
        return (f"{cc} used more than {limits.cpu_seconds} s of CPU time compiling {filename} (a template "
                f"or constexpr that never ends?) and was stopped. Look for such code; if the code is "
                f"right and only slow to compile, raise $PMPP_COMPILE_CPU (seconds).")
    if why == "File size limit exceeded" or status == -signal.SIGXFSZ:
        return (f"{cc} would write a file larger than {_size(limits.file_size)} compiling {filename} (a "
                f"huge initialized array, or an endless stream of error messages?) and was stopped. "
                f"Make the array smaller or fix the first errors; if the code is right, raise "
                f"$PMPP_COMPILE_FILE_MB.")
    if why == "Killed" or status == -signal.SIGKILL:
        return (f"{cc} was killed compiling {filename} (out of CPU time or memory: a template or constexpr "
                f"that never ends?). Look for such code; the limits are $PMPP_COMPILE_CPU and "
                f"$PMPP_COMPILE_MEMORY_MB.")
    return None


# ---- #include of device and system files --------------------------------------------------------

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(?:include_next|include|import)\b[ \t]*", re.M)
_OPERAND = re.compile(r'"(?P<quoted>[^"\n]*)"|<(?P<angled>[^>\n]*)>')
_SYSTEM_ROOTS = ("/dev", "/proc", "/sys")
_SCANNED_HEADER_BYTES = 1 << 20   # larger headers are left to the compile limits
_SCANNED_HEADERS = 100


def refuse_special_includes(src, filename, source_dir, include_dirs):
    """Raise CompileError for an ``#include`` in ``src`` (or in a user header it includes) of a
    device or system file (/dev, /proc, /sys, a pipe): g++ would read /dev/zero until memory runs
    out and /dev/stdin from the grader. ``source_dir``: where g++ looks up ``#include "x"`` of
    ``src`` first; ``include_dirs``: the -I directories. Includes that macros build are not seen
    here; the compile limits stop those."""
    searched = [*map(str, include_dirs), str(INCLUDE_DIR), *_system_include_dirs()]
    pending, seen = [(src, filename, str(source_dir))], set()
    while pending:
        text, name, own_dir = pending.pop()
        for pos, operand, quoted in _include_operands(text):
            dirs = [own_dir, *searched] if quoted else searched
            special = _special_file(operand, dirs)
            if special:
                _refuse(text, pos, name, operand, quoted, special)
            header = _user_header(operand, dirs)
            if header and header not in seen and len(seen) < _SCANNED_HEADERS:
                seen.add(header)
                pending.append((Path(header).read_text(errors="replace"), header, os.path.dirname(header)))


def _include_operands(text):
    """(offset, file named, quoted?) of each ``#include "file"`` / ``<file>`` of ``text``'s code."""
    for directive in _INCLUDE.finditer(_source.mask_code(text)):   # comments blanked
        m = _OPERAND.match(text, directive.end())
        if m:
            quoted = m.group("quoted") is not None
            yield directive.start(), m.group("quoted") if quoted else m.group("angled"), quoted


def _special_file(operand, dirs):
    """The device or system file that ``#include operand`` reads through one of ``dirs``, or None."""
    for directory in dirs:
        path = os.path.join(directory, operand)   # an absolute operand stands alone
        for candidate in (os.path.normpath(path), os.path.realpath(path)):
            if any(candidate == root or candidate.startswith(root + "/") for root in _SYSTEM_ROOTS):
                return candidate
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return os.path.realpath(path)
    return None


def _refuse(text, pos, name, operand, quoted, special):
    file, line = _source.locate(text, pos, name)
    shown = f'"{operand}"' if quoted else f"<{operand}>"
    message = (f"{file}:{line}: #include {shown} refused: {special} is a device or system file, not a "
               f"header (g++ would read it without end, or read this machine's input or state into the "
               f"build). Include only header files.")
    raise CompileError(message, filename=file, line=line, log=f"{file}:{line}: error: {message}")


def _user_header(operand, dirs):
    """The first regular file ``operand`` names in ``dirs``, when it is the student's (not one of
    the engine's or the system's headers) and small enough to scan."""
    for directory in dirs:
        path = os.path.realpath(os.path.join(directory, operand))
        if os.path.isfile(path):
            if _is_internal(path) or path.startswith(tuple(_system_include_dirs())):
                return None
            return path if os.path.getsize(path) <= _SCANNED_HEADER_BYTES else None
    return None


def _include_dirs(flags):
    return [flag[2:] for flag in flags if flag.startswith("-I")]


def _system_include_dirs():
    """The directories the compiler searches for ``#include <...>``."""
    return _search_path(cxx().command)


@functools.lru_cache(maxsize=None)
def _search_path(command):
    """The ``#include <...>`` directories of compiler ``command`` (from ``-E -v``)."""
    try:
        log = subprocess.run([*command, "-x", "c++", "-E", "-v", "-"], input="", capture_output=True,
                             text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return ()
    listed = log.partition("#include <...> search starts here:")[2].partition("End of search list.")[0]
    return tuple(os.path.realpath(line.strip()) for line in listed.splitlines() if line.strip())


_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")
_USER_CONTEXT = re.compile(
    r"^(?:In file included from |\s+from )?(?P<file>[^:\n]+?):(?P<line>\d+)(?::\d+)?[:,]\s*(?:required from|$)")
_MACRO_EXPANSION = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):\d+: note: in expansion of macro")
_NOTE = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:\d+:)? note: (?P<msg>.*)$")
# clang's notes after an error in a template: where it was instantiated from (g++ says so before it)
_REQUESTED_HERE = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):\d+: note: in instantiation of .* requested here$")
# clang names the condition of a failed static_assert; g++ gives its message only
_STATIC_ASSERT_CONDITION = re.compile(r"^static assertion failed due to requirement '.*?': ")
_EXCERPT = re.compile(r"^\s*\d*\s+\|")  # g++'s quote of a source line, its caret and fix-it lines
_COLUMN = re.compile(r"^[^:\n]+?:\d+:(?P<column>\d+): ")
_FIX_IT = re.compile(r"^\s+\|")  # the caret line, or a suggested replacement under it

# Names of the engine's own that g++ may put in a message (a suggestion for a misspelt name, a
# candidate's signature), and the CUDA names a student wrote.
_CUDA_NAMES = {
    "pmpp_syncthreads_op": "__syncthreads_count", "pmpp_syncthreads": "__syncthreads",
    "pmpp_activemask": "__activemask", "pmpp_device_assert": "assert", "pmpp_trap": "__trap",
    "pmpp_dim": "dim3", "::pmpp::detail::thread_idx()": "threadIdx",
    "::pmpp::detail::block_idx()": "blockIdx", "::pmpp::detail::block_dim()": "blockDim",
    "::pmpp::detail::grid_dim()": "gridDim",
}
_ENGINE_NAME = re.compile(r"pmpp|PMPP|__tsan|__sanitizer")
# A symbol no library defines, as GNU ld, LLVM's lld and Apple's linker say it.
_UNDEFINED = re.compile(r"undefined reference to [`'‘](.+?)['’]|undefined symbol: (.+?)$"
                        r'|^\s+"(.+?)", referenced from:', re.M)
_SUGGESTION = re.compile(r"; did you mean [‘'`](?P<name>[^’'`]+)[’'`]\?")


def cuda_names(text):
    """g++'s text with the engine's internal names put back to the CUDA names they stand for, and
    suggestions of other internal names ("did you mean 'pmpp_...'?") left out."""
    for internal, cuda in _CUDA_NAMES.items():
        end = r"\b" if internal[-1].isalnum() else ""
        text = re.sub(rf"(?<![\w:])(?:::)?{re.escape(internal.lstrip(':'))}{end}", cuda, text)
    return _SUGGESTION.sub(lambda m: "" if _ENGINE_NAME.search(m.group("name")) else m.group(0), text)


def _is_internal(path):
    """True for our shim headers, system headers (the compiler's own too, such as zig's libc++) and
    the generated source file."""
    p = path.strip()
    return (p.startswith(str(INCLUDE_DIR)) or p.startswith("/usr/") or p.startswith("<")
            or p.startswith(tuple(d + "/" for d in _system_include_dirs()))
            or Path(p).name.startswith("mod-") and p.endswith(".cpp"))


def _user_location(lines, idx, file, line):
    """Where in the user's code an error in one of the engine's headers comes from: the outermost
    macro expansion after it, else the instantiation or #include that led to it."""
    expansion = requested = None
    for nxt in lines[idx + 1:]:
        if _DIAGNOSTIC.match(nxt):
            break
        e = _MACRO_EXPANSION.match(nxt)
        if e and not _is_internal(e.group("file")):
            expansion = e.group("file"), int(e.group("line"))
        r = _REQUESTED_HERE.match(nxt)
        if r and not requested and not _is_internal(r.group("file")):
            requested = r.group("file"), int(r.group("line"))
    if expansion or requested:
        return expansion or requested
    for prev in reversed(lines[:idx]):
        if _DIAGNOSTIC.match(prev):
            break
        c = _USER_CONTEXT.match(prev)
        if c and not _is_internal(c.group("file")):
            return c.group("file"), int(c.group("line"))
    return file, line


def _quote(source, filename, file, line, column=None):
    """g++-style quote of line ``line`` of the user's file (g++ quotes only files it can open, and
    the .cu file is compiled from a copy), with a caret under ``column`` where it falls on it."""
    if source is None or file != filename:
        return []
    text = source.splitlines()
    offset = 1 if text and text[0].startswith("#line 1 ") else 0
    if not 0 < line <= len(text) - offset:
        return []
    code = text[line - 1 + offset].rstrip().expandtabs(8)
    quoted = [f"{line:5} | {code}"]
    if column and 0 < column <= len(code):
        quoted.append(f"{'':5} | {' ' * (column - 1)}^")
    return quoted


def _error_notes(lines, start):
    """The notes of the error whose diagnostic is lines[start - 1] (candidates, "declared here"...),
    with the engine's header names and quotes of its code left out, up to the next error."""
    out, keep_quote = [], False
    for text in lines[start:]:
        if _DIAGNOSTIC.match(text):
            break
        if _EXCERPT.match(text):
            if keep_quote:
                out.append(text)
            continue
        note = _NOTE.match(text)
        keep_quote = False
        if not note or _REQUESTED_HERE.match(text):
            continue                      # context: "In file included from", "In function ..."
        if not _is_internal(note.group("file")):
            out.append(text)
            keep_quote = True
        elif not _ENGINE_NAME.search(cuda_names(note.group("msg"))) and f"note: {note.group('msg')}" not in out:
            out.append(f"note: {note.group('msg')}")
    return out


_UNDECLARED = re.compile(r"^(?:use of undeclared identifier '(?P<name>\w+)'|‘(?P<gcc_name>\w+)’ was not "
                         r"declared in this scope(?:; did you mean .*)?)$")


@functools.lru_cache(maxsize=None)
def _prelude_cuda_names():
    """The CUDA names the prelude defines (functions, macros and built-in variables)."""
    text = (INCLUDE_DIR / "pmpp_cuda.h").read_text()
    names = set(re.findall(r"\b((?:__|atomic)[A-Za-z]\w*)\s*\(", text)) | set(_CUDA_NAMES.values())
    builtin = ("__builtin", "__attribute", "__atomic", "__has", "__typeof")
    return sorted(n for n in names if not (_ENGINE_NAME.search(n) or n.startswith(builtin) or n.endswith("__")))


def _suggest_cuda_name(msg):
    """clang's "use of undeclared identifier" with the CUDA name it is close to, where clang made no
    suggestion (zig's clang turns spelling suggestions off): "did you mean '__syncthreads'?"; and for
    an undeclared ``__name`` (g++ or clang) nothing close to: that the engine may lack that intrinsic."""
    m = _UNDECLARED.match(msg)
    if not m:
        return msg
    name = m.group("name") or m.group("gcc_name")
    if m.group("name"):
        close = difflib.get_close_matches(name, _prelude_cuda_names(), n=1, cutoff=0.8)
        if close:
            return f"{msg}; did you mean '{close[0]}'?"
    if name.startswith("__") and " did you mean" not in msg:
        return (f"{msg}: if {name} is a CUDA intrinsic, pmpp's CPU engine does not provide it (the "
                f"engine's README, Supported CUDA, lists what it does): write it in plain CUDA C++")
    return msg


def _as_gcc_says(msg, diagnostic):
    """clang's wording of an #error or a failed static_assert in the engine's headers, as g++ puts
    it: "#error ..." (clang leaves the directive out) and "static assertion failed: ..."."""
    msg = _STATIC_ASSERT_CONDITION.sub("static assertion failed: ", msg)
    file, line = diagnostic.group("file"), int(diagnostic.group("line"))
    if msg.startswith("#error") or not file.startswith(str(INCLUDE_DIR)):
        return msg
    try:
        code = Path(file).read_text().splitlines()[line - 1]
    except (OSError, IndexError):
        return msg
    return f"#error {msg}" if re.match(r"\s*#\s*error\b", code) else msg


def compile_error(log, filename, names, n_kernel_names, source=None):
    """CompileError whose message is the first error in full: the .cu file and line, g++'s message,
    the line of code and the error's notes, in CUDA's names (``log``: all of g++'s output).
    ``source``: the code compiled (as given, starting with its #line directive), to quote from."""
    lines = log.splitlines()
    for idx, text in enumerate(lines):
        m = _DIAGNOSTIC.match(text)
        if not m:
            continue
        file, line = m.group("file"), int(m.group("line"))
        msg = _suggest_cuda_name(_as_gcc_says(m.group("msg").strip(), m))
        if file == _source.REGISTRATION_FILE:
            entry = line - 2
            name = names[entry] if 0 <= entry < len(names) else "?"
            origin = "kernel_names" if entry < n_kernel_names else "name_expressions"
            return CompileError(
                f"{filename}: cannot make '{name}' (from {origin}) a launchable kernel: {msg}. "
                f"It must name a __global__ function of {filename}"
                f"{' with its template arguments' if origin == 'name_expressions' else ''}.",
                filename=filename, line=None, log=log)
        column = _COLUMN.match(text)
        quote = [] if _is_internal(file) else [
            q for q in itertools.takewhile(_EXCERPT.match, lines[idx + 1:])
            if not (_FIX_IT.match(q) and _ENGINE_NAME.search(cuda_names(q)))]  # a dropped suggestion's
        if _is_internal(file):
            file, line = _user_location(lines, idx, file, line)
            column = None
        if not quote:
            quote = _quote(source, filename, file, line, column and int(column.group("column")))
        more = sum(1 for t in lines[idx + 1:] if _DIAGNOSTIC.match(t))
        message = "\n".join([f"{file}:{line}: {msg}", *quote, *_error_notes(lines, idx + 1)])
        if more:
            message += f"\n(and {more} more error{'s' if more > 1 else ''} after this one)"
        return CompileError(cuda_names(message), filename=file, line=line, log=log)
    m = _UNDEFINED.search(log)
    if m:
        symbol = next(filter(None, m.groups()))
        return CompileError(f"{filename}: {symbol} is used but never defined (pmpp's CPU engine "
                            f"links each .cu file on its own: define it in this file or a header it "
                            f"includes)", filename=filename, log=log)
    return CompileError(f"{filename}: {cxx().name} failed:\n{cuda_names(log)}", filename=filename, log=log)


def source_locations(library, offsets):
    """``{offset: (file, line)}`` for code addresses of a module (offsets from its load address,
    each just past the instruction, as return addresses are): the innermost source location in the
    user's files, so that an access inlined from the prelude names the kernel line that made it.
    Offsets that have no line are left out. Read from the module's DWARF (see lines.py)."""
    import pmpp.backends.cpu.lines as lines
    found = {}
    for before, chain in lines.frames(library, {int(o) - 1 for o in offsets}).items():
        for file, line in chain:
            if _is_internal(file):
                continue
            if file.startswith(DEBUG_PREFIX + "/"):
                file = file[len(DEBUG_PREFIX) + 1:]
            found[before + 1] = (file, line)
            break
    return found


def symbolize(message):
    """Replace the runtime's ``{{pc:module.so:0xOFFSET}}`` markers by ``file.cu:line`` (the
    innermost line of the user's files, see :func:`source_locations`)."""
    pattern = r"\{\{pc:(.+?):0x([0-9a-f]+)\}\}"
    markers = re.findall(pattern, message)
    if not markers:
        return message
    by_module = {}
    for path, offset in markers:
        by_module.setdefault(path, set()).add(offset)
    where = {}
    for path, offsets in by_module.items():
        # a marker is the instruction's own offset; source_locations takes the one just past it
        found = source_locations(path, [int(o, 16) + 1 for o in offsets])
        for o in offsets:
            file_line = found.get(int(o, 16) + 1)
            where[(path, o)] = f"{file_line[0]}:{file_line[1]}" if file_line else f"{Path(path).name}+0x{o}"
    return re.sub(pattern, lambda m: where[(m.group(1), m.group(2))], message)
