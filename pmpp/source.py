"""Kernel sources: finding files, the ``#line`` header, compile logs and ``__global__`` signatures."""
from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .conditionals import active_code
from .errors import CompileError

PACKAGE_DIR = Path(__file__).resolve().parent


def kernels_dir() -> Path:
    """The ``kernels/`` folder: ``$PMPP_KERNELS``, else the repository's ``kernels/``."""
    env = os.environ.get("PMPP_KERNELS")
    return Path(env) if env else PACKAGE_DIR.parent / "kernels"


def resolve(path: str | os.PathLike) -> Path:
    """Find a kernel file: relative to ``kernels/`` first, then as given."""
    path = Path(path)
    candidates = [path] if path.is_absolute() else [kernels_dir() / path, Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    known = [str(p.relative_to(kernels_dir())) for p in kernels_dir().rglob("*.cu")]
    close = difflib.get_close_matches(str(path), known, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no kernel file {str(path)!r} (looked at {tried}).{hint}")


def display_name(path: Path) -> str:
    """The name used in ``#line`` and messages: relative to ``kernels/`` where possible."""
    try:
        return path.resolve().relative_to(kernels_dir().resolve()).as_posix()
    except ValueError:
        return str(path)


def with_line_directive(text: str, filename: str) -> str:
    """Prepend ``#line 1 "file"`` so every compiler names the ``.cu`` file and its own lines."""
    return _line_directive(1, filename) + text


def define_options(defines) -> list[str]:
    """``{"BLOCK_DIM": 256, "USE_X": True}`` -> ``["-DBLOCK_DIM=256", "-DUSE_X"]``."""
    options = []
    for name, value in (defines or {}).items():
        if not re.fullmatch(r"[A-Za-z_]\w*", str(name)):
            raise ValueError(f"defines: {name!r} is not a valid macro name")
        if value is True:
            options.append(f"-D{name}")
        elif value is False or value is None:
            options.append(f"-U{name}")
        else:
            options.append(f"-D{name}={value}")
    return options


# ----------------------------------------------------------------------------------------------
# #include "file": the student's headers are put into the source itself, each between #line
# directives, so that both backends compile one self-contained text: headers are found relative to
# the file that includes them (as nvcc does), the CPU engine's rewriting of __shared__ reaches
# them, and a changed header is a changed source to every cache.

_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*', re.M)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b[^\n]*", re.M)
_MAX_INCLUDE_DEPTH = 200            # as g++'s limit of nested #include
_MAX_HEADER_BYTES = 4 << 20          # larger files are left to the compiler


def include_dirs(options) -> list[Path]:
    """The ``-I`` directories among NVRTC-style ``options`` (``-Idir``, ``-I dir``,
    ``--include-path=dir``), resolved against the current directory."""
    dirs, opts = [], [str(o) for o in options]
    for i, opt in enumerate(opts):
        if opt in ("-I", "--include-path") and i + 1 < len(opts):
            dirs.append(opts[i + 1])
        elif opt.startswith("--include-path="):
            dirs.append(opt.split("=", 1)[1])
        elif opt.startswith("-I") and len(opt) > 2:
            dirs.append(opt[2:])
    return [Path(d).resolve() for d in dirs]


def expand_includes(text: str, filename: str, directory: Path, search=()) -> str:
    """``text`` (named ``filename`` in messages, its ``#include "x"`` looked up in ``directory``
    first, then in ``search``) with each such header it reaches written in its place."""
    return _Includes(list(search)).expand(text, filename, Path(directory), ())


class _Includes:
    def __init__(self, search):
        self.search = search

    def expand(self, text, filename, directory, stack):
        code = strip_comments(text)
        out, last = [], 0
        for m in _QUOTED_INCLUDE.finditer(code):
            header = self.find(m.group(1), directory)
            if header is None:
                continue   # the compiler's own headers (cuda_runtime.h ...), or a missing file
            out.append(text[last:m.start()])
            line = code.count("\n", 0, m.end()) + 1
            out.append(self.inline(header, stack) + _line_directive(line + 1, filename))
            last = m.end() + 1 if code.startswith("\n", m.end()) else m.end()
        out.append(text[last:])
        return "".join(out)

    def find(self, operand, directory):
        for folder in (directory, *self.search):
            path = (folder / operand).resolve()
            if path.is_file():
                return path if _inlinable(path) else None
        return None

    def inline(self, header, stack):
        if header in stack:
            return ""    # included again from itself: only its include guard would be read
        if len(stack) >= _MAX_INCLUDE_DEPTH:
            raise CompileError(f"{display_name(stack[-1])}: #include nested more than "
                               f"{_MAX_INCLUDE_DEPTH} deep", filename=display_name(stack[-1]))
        text = header.read_text(errors="replace")
        once = _PRAGMA_ONCE.search(strip_comments(text))
        if once:   # becomes an include guard: inlined text is no file of its own to the compiler
            text = text[:once.start()] + text[once.end():]
        name = display_name(header)
        body = self.expand(text, name, header.parent, (*stack, header))
        body = _line_directive(1, name) + body + ("" if body.endswith("\n") else "\n")
        if not once:
            return body
        guard = "__PMPP_ONCE_" + hashlib.sha256(str(header).encode()).hexdigest()[:16]
        return f"#ifndef {guard}\n#define {guard}\n{body}#endif\n"


def _line_directive(line: int, filename: str) -> str:
    escaped = filename.replace("\\", "/").replace('"', '\\"')
    return f'#line {line} "{escaped}"\n'


def _inlinable(path: Path) -> bool:
    """Is ``path`` a header of the student's? Not CUDA's own (the toolkit's, or the CPU engine's
    stand-ins: the compiler finds those), nor a system file under /proc or /sys (the CPU engine
    refuses those before compiling), nor one too large to read here."""
    if path.parts[1:2] in (("proc",), ("sys",), ("dev",)) or (path.parent / "cuda_runtime_api.h").is_file():
        return False
    return path.stat().st_size <= _MAX_HEADER_BYTES


# nvcc/NVRTC: "file.cu(12): error: ..."; g++: "file.cu:12:5: error: ..."
_ERROR_LINE = re.compile(
    r"^(?P<file>[^\s:()][^:()]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::\d+)?):\s*(?:fatal\s+)?error\b",
    re.MULTILINE,
)


def compile_error(log: str, filename: str) -> CompileError:
    """Turn a compiler log into a :class:`CompileError` naming the first error's file and line."""
    line = None
    where = filename
    for match in _ERROR_LINE.finditer(log):
        line = int(match["l1"] or match["l2"])
        where = match["file"].strip()
        if where.endswith(Path(filename).name):
            break
    location = f"{where}:{line}" if line is not None else where
    first = _first_error_text(log)
    message = f"{location}: {first}\n\ncompiler log:\n{log.strip()}" if first else \
        f"{location}: compilation failed\n\ncompiler log:\n{log.strip()}"
    return CompileError(message, filename=where, line=line, log=log)


def _first_error_text(log: str) -> str:
    for raw in log.splitlines():
        if re.search(r"\berror\b", raw):
            return raw.split("error", 1)[1].lstrip(":# ").strip()
    return ""


# ----------------------------------------------------------------------------------------------
# __global__ signatures: enough C++ to check arguments before a launch.

@dataclass(frozen=True)
class Param:
    name: str
    ctype: str          # the declared type without the name, e.g. "const float *"
    base: str           # the element/scalar type, e.g. "float", "unsigned int", "__half"
    pointer: bool
    const: bool         # pointee is const (for pointers)

    def __str__(self) -> str:
        return f"{self.ctype} {self.name}".replace(" *", "*")


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[Param, ...]
    template_params: tuple[str, ...] = ()   # e.g. ("unsigned int blockSize", "typename T")

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"


_GLOBAL = re.compile(r"\b__global__\b")
_QUALIFIERS = re.compile(r"\b(?:__restrict__|__restrict|restrict|__device__|__host__|volatile)\b")


def strip_comments(text: str) -> str:
    """Remove comments, keeping newlines so that line numbers stay put."""
    def blank(match):
        s = match.group(0)
        if s.startswith("/"):
            return re.sub(r"[^\n]", " ", s)
        return s
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', blank, text, flags=re.DOTALL)


def find_kernels(text: str, macros: Mapping[str, object] | None = None) -> dict[str, KernelSignature]:
    """All ``__global__`` functions of a source, by name, but those in branches of ``#if`` and its
    kin that a compiler skips, given ``macros`` (the ``-D`` options: :func:`pmpp.conditionals.macros_of`)."""
    code = active_code(strip_comments(text), macros)
    kernels = {}
    for match in _GLOBAL.finditer(code):
        sig = _parse_kernel_at(code, match.start())
        if sig is not None:
            kernels[sig.name] = sig
    return kernels


def _parse_kernel_at(code: str, start: int) -> KernelSignature | None:
    head = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                      r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
    m = head.match(code, start)
    if not m:
        return None
    close = _matching(code, m.end() - 1, "(", ")")
    params = tuple(_parse_param(p) for p in _split_top(code[m.end():close]) if p.strip() not in ("", "void"))
    return KernelSignature(m.group(1), params, _template_params(code, start))


def _template_params(code: str, start: int) -> tuple[str, ...]:
    prefix = code[:start]
    boundary = max(prefix.rfind(";"), prefix.rfind("}"), prefix.rfind("{"))
    statement = prefix[boundary + 1:]
    m = re.search(r"\btemplate\s*<", statement)
    if not m:
        return ()
    open_at = boundary + 1 + m.end() - 1
    close = _matching(code, open_at, "<", ">")
    return tuple(p.strip() for p in _split_top(code[open_at + 1:close]))


def _matching(code: str, open_at: int, opening: str, closing: str) -> int:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == opening:
            depth += 1
        elif code[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced {opening}{closing} in kernel signature")


def split_top(text: str, opening: str = "(<[", closing: str = ")>]") -> list[str]:
    """``text`` split at the commas outside any of the brackets ``opening``/``closing``."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _split_top(text: str) -> list[str]:
    return [p.strip() for p in split_top(text)]


def _parse_param(text: str) -> Param:
    text = text.split("=", 1)[0]
    text = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.match(r"^(.*?)(\w+)\s*(\[\s*\])?$", text)
    if not m or not m.group(1).strip():
        return Param(name=text, ctype=text, base=text, pointer=False, const=False)
    ctype, name = m.group(1).strip(), m.group(2)
    pointer = "*" in ctype or "&" in ctype or bool(m.group(3))
    before_star = ctype.split("*", 1)[0]
    const = pointer and bool(re.search(r"\bconst\b", before_star))
    base = " ".join(re.sub(r"\bconst\b|[*&]", " ", before_star if pointer else ctype).split())
    return Param(name=name, ctype=ctype, base=base, pointer=pointer, const=const)


def instantiate(sig: KernelSignature, expression: str) -> KernelSignature:
    """The signature of a template instance such as ``reduce5<256>`` or ``sum<float, 4>``."""
    m = re.fullmatch(r"\s*(\w+)\s*<(.*)>\s*", expression)
    if not m or not sig.template_params:
        return sig
    args = _split_top(m.group(2))
    types = {}
    for declared, arg in zip(sig.template_params, args):
        tm = re.match(r"(?:typename|class)\s+(\w+)", declared)
        if tm:
            types[tm.group(1)] = arg
    if not types:
        return KernelSignature(expression, sig.params, sig.template_params)

    def substitute(p: Param) -> Param:
        base = types.get(p.base, p.base)
        ctype = re.sub(r"\b(\w+)\b", lambda t: types.get(t.group(1), t.group(1)), p.ctype)
        return Param(p.name, ctype, base, p.pointer, p.const)

    return KernelSignature(expression, tuple(map(substitute, sig.params)), sig.template_params)


def signature_for(kernels: dict[str, KernelSignature], name: str) -> KernelSignature | None:
    base = name.split("<", 1)[0].strip()
    sig = kernels.get(base)
    return instantiate(sig, name) if sig is not None and "<" in name else sig
