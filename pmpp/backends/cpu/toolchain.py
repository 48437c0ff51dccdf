"""The CPU engine's compilers and runtime: find the C++ compiler (g++ or clang, see
:class:`Compiler`) and Boost.Context, and build the runtime library once into the disk cache
(``$PMPP_CACHE_DIR/cpu`` or ``~/.cache/pmpp/cpu``) as ``libpmpp_cpu_rt-<key>.so`` (``.dylib`` on
macOS), keyed by its sources and the compiler. Kernel modules are built by :mod:`.build`, under
the limits of :mod:`.limits`; :mod:`.diagnostics` turns the compiler's messages into a student's.
"""

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pmpp.errors import BackendUnavailableError

import pmpp.backends.cpu.source as _source
import pmpp.paths as _paths

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE / "include"
RUNTIME_SOURCE = HERE / "runtime" / "pmpp_runtime.cpp"
ENGINE_VERSION = "1"  # bump when generated code or flags change
DEBUG_PREFIX = "/pmpp-build"  # what the cache directory is called in debug info
INCLUDE_PREFIX = "/pmpp-include"  # what INCLUDE_DIR is called in a module

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
# 16- or 8-byte access as on the GPU instead of becoming four or two 4-byte ones; and no jump
# threading (-fno-thread-jumps): from g++ 13 on it copies a load into the path of the lanes a later
# branch tells apart (`v = lane < 8 ? s[lane] : 0; if (t == 0) ...`: one copy for lane 0, one for
# lanes 1-7), and a warp then counts two load instructions where a GPU issues one. clang: "bb" makes
# it one call per basic block as g++ does (its default is one per edge), and no block is left out
# for being implied by another (sanitizer-coverage-prune-blocks).
COUNT_FLAGS = {
    "gcc": ["-DPMPP_COUNT=1", "-fno-tree-sra", "-fno-thread-jumps", "-fsanitize-coverage=trace-pc"],
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
                    macros=digest(*sorted(macros.items()))[:16])


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


def digest(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def engine_digest():
    files = sorted(f for f in INCLUDE_DIR.rglob("*") if f.is_file()) + [RUNTIME_SOURCE, Path(_source.__file__)]
    # Not where they are: a module names the engine's headers INCLUDE_PREFIX (see
    # include_path_flags), so that another copy of pmpp with the same engine (a student release
    # beside the workbook, sharing PMPP_CACHE_DIR) reuses its builds.
    return digest(ENGINE_VERSION, *(f.name.encode() + f.read_bytes() for f in files))


def include_path_flags():
    """The engine's headers for a module's compile, named INCLUDE_PREFIX in what it builds (debug
    information, ``__FILE__``): a module is the same whichever copy of the engine built it."""
    return [f"-ffile-prefix-map={INCLUDE_DIR}={INCLUDE_PREFIX}", "-I", str(INCLUDE_DIR)]


def tmp_name(final):
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
    key = digest(engine_digest(), *cc.identity, cc.cross, inc, lib)[:16]
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
    tmp = tmp_name(out)
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
