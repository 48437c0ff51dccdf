"""``#include`` of device and system files (/dev, /proc, /sys, pipes) refused before the compiler
starts, and which headers are the engine's or the system's (not the student's).
"""

import functools
import os
import re
import stat
import subprocess
from pathlib import Path

from pmpp.errors import CompileError

import pmpp.backends.cpu.source as _source
from pmpp.backends.cpu.toolchain import INCLUDE_DIR, INCLUDE_PREFIX, cxx

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
            if is_internal(path) or path.startswith(tuple(_system_include_dirs())):
                return None
            return path if os.path.getsize(path) <= _SCANNED_HEADER_BYTES else None
    return None


def include_dirs(flags):
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


def is_internal(path):
    """True for our shim headers, system headers (the compiler's own too, such as zig's libc++) and
    the generated source file."""
    p = path.strip()
    return (p.startswith((str(INCLUDE_DIR), INCLUDE_PREFIX)) or p.startswith("/usr/") or p.startswith("<")
            or p.startswith(tuple(d + "/" for d in _system_include_dirs()))
            or Path(p).name.startswith("mod-") and p.endswith(".cpp"))
