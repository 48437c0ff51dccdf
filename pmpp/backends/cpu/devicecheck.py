"""Device code may call only what CUDA's device code can: ``__device__`` functions, CUDA's device
runtime (printf, malloc, free, memcpy, memset, assert, new and delete) and the math library. The
engine compiles kernels with the host compiler, which would accept ``fopen()`` or ``system()`` in
a kernel; this check refuses them as NVRTC does, with its wording and the line of the call.

How: the source is compiled a second time, to assembly, at -O0 (every call stays a call) with
``-fpatchable-function-entry=1`` and with ``__device__`` and ``__global__`` defined as
``__attribute__((patchable_function_entry(0, 0)))``. Every function the compiler emits then says
in its code whether the source declared it device code (no patch record) or not (a record in
``__patchable_function_entries``): macros, templates, ``static`` and ``extern "C"`` functions
included, since it is the compiler that applied the keyword. The check walks the calls from each
launchable kernel (through the engine's kernel thunks) to the device functions they reach, and
refuses, at the line of the call (the ``.loc`` before it): a call to a function of the user's
files declared without ``__device__``, a call into the C++ standard library other than its math
functions, and any reference to a symbol defined outside the module (libc, POSIX, libstdc++) other
than the device runtime's. Code of the engine's own headers is the CUDA API and is not looked into.

Where NVRTC is installed, its front end compiles the source first (:mod:`.nvrtc`); what it refuses
and this check and g++ accept is refused with NVRTC's words, and ``Verdict.nvrtc`` says what it did.
Verdicts are cached under the same key as modules (source, options, compiler, engine) with the
hashes of the user headers read, so a module that passed costs nothing more on later loads; the
check runs before the module cache is consulted, so a module built with the check off
(``PMPP_DEVICE_CHECK=0``, for testing the grading sandbox with hostile kernels) never lets one
through later.
"""

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pmpp.errors import CompileError

import pmpp.backends.cpu.nvrtc as _nvrtc
import pmpp.backends.cpu.source as _source
import pmpp.backends.cpu.diagnostics as _diagnostics
import pmpp.backends.cpu.flags as _flags
import pmpp.backends.cpu.includes as _includes
import pmpp.backends.cpu.limits as _limits
import pmpp.backends.cpu.pch as _pch
import pmpp.backends.cpu.toolchain as _toolchain
import pmpp.paths as _paths

CHECK_VERSION = "1"
MARKS = Path(__file__).resolve().parent / "devicecheck_marks.h"

# What CUDA's device code may call besides __device__ functions (CUDA C++ Programming Guide:
# formatted output, dynamic global memory allocation, assertion, and the math API of the CUDA Math
# API reference), as C names; the standard library's own versions (std::sqrt...) count too.
_MATH = set("""acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi erf erfc
erfcinv erfcx erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb
isfinite isinf isnan j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround
modf nan nearbyint nextafter norm3d norm4d normcdf normcdfinv pow rcbrt remainder remquo rhypot
rint round rsqrt scalbln scalbn signbit sin sincos sincospi sinh sinpi sqrt tan tanh tgamma trunc
y0 y1 yn abs labs llabs""".split())
_MATH |= {name + "f" for name in _MATH} | {name + "l" for name in _MATH}
_RUNTIME = {"printf", "vprintf", "malloc", "free", "memcpy", "memset", "memmove", "clock",
            "__assert_fail", "__assert_rtn", "__stack_chk_fail", "__tls_get_addr"}
# the compiler's own support code: exception unwinding at -O0, guards of local statics
_SUPPORT = re.compile(r"^(?:__cxa_|_Unwind_|__ubsan_|__gxx_personality|__clang_call_terminate$"
                      r"|_ZSt9terminatev$|_Zn[wa]|_Zd[la]|_GLOBAL_OFFSET_TABLE_$|__dso_handle$)")
_KERNEL_THUNK = "_ZN4pmpp6KernelI"   # pmpp::Kernel<F>::call, which calls kernel F
_SPECIAL_MEMBER = re.compile(r"(?:C[123]|D[012]|aS)E")   # constructors, destructors, operator=


@dataclass(frozen=True)
class Verdict:
    """What the device-code check found: ``checked`` (False where it could not run, with
    ``reason``), and what NVRTC's check, run first, said (``nvrtc``: "nvrtc 13.5: passed" or
    "skipped: why"; see :mod:`.nvrtc`)."""
    checked: bool
    reason: str = ""
    nvrtc: str = _nvrtc.NOT_INSTALLED


def enabled():
    return os.environ.get("PMPP_DEVICE_CHECK", "1").strip().lower() not in ("0", "off", "no", "false")


def refuse_host_calls(src, prepared, filename, flags, out_dir, options=None, name_expressions=()):
    """Raise CompileError, at the line of the first one, for a call from device code to a host
    function. ``src``: the source as given (to quote from); ``prepared``: what the engine compiles;
    ``flags``: its translated options; ``out_dir``: the cache directory; ``options`` (default
    ``flags``) and ``name_expressions``: as the GPU backend would get them, for NVRTC's check,
    which runs first. Returns a Verdict."""
    if not enabled():
        return Verdict(False, "turned off by $PMPP_DEVICE_CHECK", "skipped: turned off by $PMPP_DEVICE_CHECK")
    said, refused = _nvrtc_check(src, filename, flags if options is None else options, name_expressions, out_dir)
    verdict = functools.partial(Verdict, nvrtc=said)
    cc = _toolchain.cxx()
    if cc.macos:
        return verdict(False, "the check reads ELF assembly; it does not run on macOS")
    relaxed = "--expt-relaxed-constexpr" in flags or "-expt-relaxed-constexpr" in flags
    key = _toolchain.digest(CHECK_VERSION, _toolchain.engine_digest(), *cc.identity, prepared, *flags,
                             MARKS.read_bytes(), relaxed)[:32]
    verdict_file = Path(out_dir) / f"devcheck-{key}.json"
    if verdict_file.exists() and _flags.headers_current(verdict_file):
        if refused:
            raise refused
        return verdict(True)
    _includes.refuse_special_includes(src, filename, out_dir, _includes.include_dirs(flags))
    with _paths.building(Path(out_dir) / f"devcheck-{key}"):
        if not (verdict_file.exists() and _flags.headers_current(verdict_file)):
            found = _assembly(cc, prepared, flags, Path(out_dir), key, filename)
            if found is None:
                return verdict(False, "the source does not compile (the compile reports why)")
            asm, deps = found
            problems = find_host_calls(parse_assembly(asm, out_dir), relaxed)
            if problems:
                raise _error(problems, src, filename)
            tmp = _toolchain.tmp_name(verdict_file)
            tmp.write_text(json.dumps(deps))
            os.replace(tmp, verdict_file)
    if refused:
        raise refused
    return verdict(True)


def _nvrtc_check(src, filename, options, name_expressions, out_dir):
    """(NVRTC's verdict, its CompileError or None). A refusal is raised only where the engine has
    nothing more precise to say: g++'s own errors, and this check's host calls named at the line of
    the call, come first."""
    try:
        return _nvrtc.check(src, filename, options, name_expressions, out_dir, _toolchain.digest), None
    except CompileError as error:
        return "refused", error


def _assembly(cc, prepared, flags, out_dir, key, filename):
    """(assembly text, {user header: sha256}) of ``prepared`` compiled for the check, or None when
    it does not compile (with the device marks, nor without them)."""
    cpp, asm, dep = (out_dir / f"devcheck-{key}{ext}" for ext in (".cpp", ".s", ".d"))
    tmp_cpp = _toolchain.tmp_name(cpp)
    tmp_cpp.write_text(prepared)
    os.replace(tmp_cpp, cpp)
    # the user's -D/-U go after the prelude, as in the module's own build (macro hygiene)
    flags, macro_include, macro_header = _flags.macros_after_prelude(flags, out_dir, f"devcheck-{key}")
    before_prelude = [*cc.common_flags(), *flags, "-O0", "-fno-sanitize=all", "-g1", "-gdwarf-4", "-w",
                      "-fno-builtin", "-fpatchable-function-entry=1", "-I", str(_toolchain.INCLUDE_DIR)]
    prelude = _pch.prelude_include(cc, before_prelude, out_dir)
    try:
        for marks in (True, False):
            # named *.s and *.d: zig's clang picks its output's kind from the name
            tmp_asm, tmp_dep = (_toolchain.tmp_name(f).with_suffix(f.suffix) for f in (asm, dep))
            base = [*cc.command, *before_prelude, *prelude, *(["-include", str(MARKS)] if marks else []),
                    *macro_include, "-x", "c++"]
            compile_cmd = [*base, "-S", str(cpp), "-o", str(tmp_asm)]
            depend_cmd = ["-MMD", "-MF", str(tmp_dep)]
            if cc.family == "gcc":
                compile_cmd[-3:-3], depend_cmd = depend_cmd, None
            else:   # zig's clang writes no assembly when asked for a dependency file as well
                depend_cmd = [*base, "-E", *depend_cmd, str(cpp), "-o", os.devnull]
            try:
                status, _ = _limits.run_limited(compile_cmd, out_dir, filename)
                if status == 0 and depend_cmd:
                    status, _ = _limits.run_limited(depend_cmd, out_dir, filename)
                if status == 0:
                    text = tmp_asm.read_text(errors="replace")
                    # without the marks every function looks like host code: only calls out of
                    # the module are judged then
                    return (text if marks else _unmarked(text)), _flags.header_digests(tmp_dep, cpp, macro_header, *_pch.files(prelude))
            finally:
                tmp_asm.unlink(missing_ok=True)
                tmp_dep.unlink(missing_ok=True)
        return None
    finally:
        cpp.unlink(missing_ok=True)
        if macro_header:
            macro_header.unlink(missing_ok=True)


def _unmarked(text):
    return text.replace("__patchable_function_entries", "__pmpp_unmarked")


# ---- reading the assembly ----------------------------------------------------------------------

@dataclass
class Function:
    name: str
    file: str = ""            # where its code starts (its first .loc)
    host: bool = False        # declared without __device__/__global__
    refs: list = field(default_factory=list)   # (symbol, is_call, file, line), in code order


_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"((?:[^"\\]|\\.)*)")?')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_TYPE_FUNCTION = re.compile(r"^\s*\.type\s+([^,\s]+),\s*[@%]function")
_LABEL = re.compile(r'^([^\s:#"]+|"[^"]+"):')
_COMMON = re.compile(r"^\s*\.l?comm\s+([^,\s]+),")
_ALIAS = re.compile(r"^\s*\.(?:set|equiv)\s+([^,\s]+),\s*([^,\s]+)\s*$")   # g++'s C1 = C2
_SIZE = re.compile(r"^\s*\.size\s+([^,\s]+),")
_INSTRUCTION = re.compile(r"^\s+([a-z][\w.]*)\s*(.*)$")
_SYMBOL = re.compile(r"(?<![%$\w.])([A-Za-z_][\w.$]*)(?:@[A-Za-z]+)?")
_REGISTER = re.compile(r"^(?:[xwvqdsbhr]\d+|sp|lr|fp|xzr|wzr|pc|lsl|lsr|asr|uxtw|sxtw)$")


def parse_assembly(text, cwd=None):
    """{name: Function} of the functions that compiler assembly ``text`` (ELF, x86-64 or AArch64)
    defines, with their symbol references and the source line of each; the module's variables are
    there too, as Functions that reference nothing. ``cwd``: where the compiler ran (clang names
    a file by that directory and the name the #line directive gave)."""
    files, functions, current = {}, {}, None
    is_function, loc, aliases = set(), ("", 0), {}
    label_owner, patched, in_patch_section = {}, set(), False
    for raw in text.splitlines():
        line = raw if raw.lstrip().startswith(".file") else raw.split("#", 1)[0]
        if line.lstrip().startswith((".section", ".text", ".data", ".bss")):
            in_patch_section = "__patchable_function_entries" in line
        if m := _FILE.match(line):
            files[m.group(1)] = _file_name(m.group(2), m.group(3), cwd)
        elif m := _TYPE_FUNCTION.match(line):
            is_function.add(m.group(1))
        elif m := _LOC.match(line):
            loc = (files.get(m.group(1), ""), int(m.group(2)))
            if current and not current.file:
                current.file = loc[0]
        elif m := _LABEL.match(line):
            name = m.group(1).strip('"')
            if name in is_function:
                current = functions.setdefault(name, Function(name))
                loc = ("", 0)
            elif name.startswith(".L"):
                label_owner[name] = current
            else:
                functions.setdefault(name, Function(name, file="<data>"))
        elif m := _COMMON.match(line):
            functions.setdefault(m.group(1), Function(m.group(1), file="<data>"))
        elif m := _ALIAS.match(line):
            aliases[m.group(1)] = m.group(2)
        elif m := _SIZE.match(line):
            current = None if current and m.group(1) == current.name else current
        elif in_patch_section and (m := re.match(r"^\s*\.(?:quad|xword|8byte)\s+(\S+)", line)):
            patched.add(m.group(1))   # the patch record of the function this label starts
        elif current and (m := _INSTRUCTION.match(line)):
            _add_references(current, m.group(1), m.group(2), loc)
    for label in patched:
        if label_owner.get(label):
            label_owner[label].host = True
    for alias, target in aliases.items():
        if target in functions:
            functions[alias] = functions[target]
    return functions


def _file_name(first, second, cwd):
    """A ``.file`` directive's file: g++ gives the name, clang the directory and the name."""
    if second is None:
        return first
    if cwd and not os.path.isabs(second) and os.path.abspath(first) == os.path.abspath(cwd):
        return second      # the name a #line directive gave
    return os.path.join(first, second)


_PREFIXES = {"lock", "rep", "repe", "repz", "repne", "repnz", "notrack", "data16", "addr32", "bnd"}


def _add_references(function, mnemonic, operands, loc):
    while mnemonic in _PREFIXES and operands:     # lock orq $0, (%rsp): orq is no symbol
        mnemonic, _, operands = operands.partition(" ")
    if mnemonic.startswith(".") or mnemonic in _PREFIXES:
        return
    is_call = mnemonic.startswith("call") or mnemonic in ("bl", "blr", "jmp", "b")
    for m in _SYMBOL.finditer(operands):
        symbol = m.group(1)
        if symbol.startswith(".L") or _REGISTER.match(symbol):
            continue
        function.refs.append((symbol, is_call, *loc))


# ---- judging -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostCall:
    file: str
    line: int
    callee: str        # the symbol called or referenced
    caller: str        # the device function (or kernel) that does it
    caller_is_kernel: bool
    is_call: bool


def find_host_calls(functions, relaxed=False):
    """The HostCalls of device code in ``functions`` (from :func:`parse_assembly`), in the order
    met walking from the kernels; ``relaxed``: --expt-relaxed-constexpr was given (then functions
    of the user's files and of the standard library are followed rather than refused, since a
    constexpr one may be called)."""
    kernels = [symbol for thunk, f in functions.items() if thunk.startswith(_KERNEL_THUNK)
               for symbol, is_call, _, _ in f.refs if is_call and symbol in functions
               and _origin(functions[symbol].file) == "user"]
    found, seen, pending = [], set(kernels), list(dict.fromkeys(kernels))
    while pending:
        caller = functions[pending.pop(0)]
        for symbol, is_call, file, line in caller.refs:
            if _origin(file) != "user":
                continue          # code of the engine's headers inlined into the caller
            follow = _judge(symbol, functions, relaxed)
            if follow is False:
                found.append(HostCall(file, line, symbol, caller.name, caller.name in kernels, is_call))
            elif follow and symbol not in seen:
                seen.add(symbol)
                pending.append(symbol)
    first_seen = {}
    for problem in found:
        first_seen.setdefault((problem.file, problem.line), len(first_seen))
    # a line's calls before the variables it names (fputs before stderr), as NVRTC orders them
    return sorted(found, key=lambda p: (first_seen[(p.file, p.line)], not p.is_call))


def _judge(symbol, functions, relaxed):
    """True: device code of the module, to be followed; None: allowed; False: host code."""
    callee = functions.get(symbol)
    if callee is None:       # defined outside the module
        return None if _allowed_outside(symbol) else False
    origin = _origin(callee.file)
    if origin in ("engine", "data"):   # the CUDA API; the module's own variables
        return None
    if origin == "system":
        return None if _base_name(symbol) in _MATH else (True if relaxed else False)
    if not callee.host or relaxed or _SPECIAL_MEMBER.search(symbol) or _local_to_device(symbol, functions):
        return True
    return False


def _allowed_outside(symbol):
    return (symbol in _RUNTIME or symbol in _MATH or bool(_SUPPORT.match(symbol))
            or bool(_diagnostics.ENGINE_NAME.search(symbol)) or _base_name(symbol) in _MATH)


def _local_to_device(symbol, functions):
    """Whether ``symbol`` is a lambda or local class member of a device function (CUDA makes a
    lambda defined in device code device code): _ZZ<its encoding>E..."""
    if not symbol.startswith("_ZZ"):
        return False
    for name, f in functions.items():
        encoding = name[2:] if name.startswith("_Z") else f"{len(name)}{name}"
        if not f.host and symbol.startswith(f"_ZZ{encoding}E"):
            return True
    return False


def _origin(file):
    """"user", "engine" (its headers: the CUDA API) or "system" (the C and C++ libraries)."""
    if not file or file == _source.REGISTRATION_FILE:
        return "engine"
    if file == "<data>":
        return "data"
    if os.path.abspath(file).startswith(str(_toolchain.INCLUDE_DIR) + os.sep):
        return "engine"
    return "system" if _includes.is_internal(file) else "user"


def _base_name(symbol):
    """The unqualified name of a function, from its symbol: "sqrt" for _ZSt4sqrtf (std::sqrt(float)),
    "sqrtf" for sqrtf, "vector" for std::vector's constructors."""
    m = re.match(r"_ZN?[KVr]*(?:St)?((?:\d+\w)?)", symbol)
    if not m:
        return symbol
    rest, name = symbol[m.start(1):], symbol
    while (n := re.match(r"\d+", rest)):
        size = int(n.group(0))
        name, rest = rest[n.end():n.end() + size], rest[n.end() + size:]
    return name


@functools.lru_cache(maxsize=4096)
def _demangle_one(symbol):
    return demangle_all((symbol,))[0]


def demangle_all(symbols):
    """C++ names of mangled ``symbols`` (through c++filt where there is one; else as they are)."""
    tool = shutil.which("c++filt")
    if not tool or not any(s.startswith("_Z") for s in symbols):
        return list(symbols)
    try:
        out = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True,
                             timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return list(symbols)
    return out if len(out) == len(symbols) else list(symbols)


# ---- the message ---------------------------------------------------------------------------------

def _error(problems, src, filename):
    first = problems[0]
    callee, caller = _cuda_name(first.callee), _cuda_name(first.caller, signature=False)
    kind = "__global__" if first.caller_is_kernel else "__device__"
    if first.is_call:
        said = f'calling a __host__ function("{callee}") from a {kind} function("{caller}") is not allowed'
    else:
        said = f'identifier "{_cuda_name(first.callee, signature=False)}" is undefined in device code'
    quote = _diagnostics.quote_line(src, filename, first.file, first.line)
    more = len({(p.file, p.line, p.callee) for p in problems}) - 1
    message = "\n".join([
        f"{first.file}:{first.line}: {said}", *quote,
        "note: device code (__global__ and __device__ functions) may call only __device__ functions, "
        "CUDA's device runtime (printf, malloc, free, memcpy, memset, assert) and the math library; "
        "CUDA refuses this call on every GPU. Declare your own helper __device__, and do host work "
        "(files, processes, the C++ standard library) on the host, before or after the launch."])
    if more:
        message += f"\n(and {more} more after this one)"
    log = "\n".join(f"{p.file}:{p.line}: error: {p.callee} called from {p.caller}" for p in problems)
    return CompileError(message, filename=first.file, line=first.line, log=log)


def _cuda_name(symbol, signature=True):
    """The name as NVRTC prints it: "fopen", "plain(float)", "S::host() const" (no return type)."""
    name = _demangle_one(symbol)
    if name == symbol:
        return symbol
    head, paren, tail = name.partition("(")
    depth, cut = 0, 0
    for i, ch in enumerate(head):      # drop a template function's return type: "float f<float>"
        depth += ch == "<"
        depth -= ch == ">"
        if ch == " " and depth == 0:
            cut = i + 1
    head = head[cut:]
    return head + paren + tail if signature else head
