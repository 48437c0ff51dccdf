"""The compiler's messages as a student should read them: the first error at the student's own
line, quoted, with the engine's names turned back into CUDA's; undefined names and a crashed
kernel's addresses mapped to source lines.
"""

import difflib
import functools
import itertools
import re
from pathlib import Path

from pmpp.errors import CompileError
from pmpp.source import strip_comments

import pmpp.backends.cpu.source as _source
from pmpp.backends.cpu.includes import is_internal
from pmpp.backends.cpu.toolchain import DEBUG_PREFIX, INCLUDE_DIR, cxx

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
ENGINE_NAME = re.compile(r"pmpp|PMPP|__tsan|__sanitizer")
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
    return _SUGGESTION.sub(lambda m: "" if ENGINE_NAME.search(m.group("name")) else m.group(0), text)



def _user_location(lines, idx, file, line):
    """Where in the user's code an error in one of the engine's headers comes from: the outermost
    macro expansion after it, else the instantiation or #include that led to it."""
    expansion = requested = None
    for nxt in lines[idx + 1:]:
        if _DIAGNOSTIC.match(nxt):
            break
        e = _MACRO_EXPANSION.match(nxt)
        if e and not is_internal(e.group("file")):
            expansion = e.group("file"), int(e.group("line"))
        r = _REQUESTED_HERE.match(nxt)
        if r and not requested and not is_internal(r.group("file")):
            requested = r.group("file"), int(r.group("line"))
    if expansion or requested:
        return expansion or requested
    for prev in reversed(lines[:idx]):
        if _DIAGNOSTIC.match(prev):
            break
        c = _USER_CONTEXT.match(prev)
        if c and not is_internal(c.group("file")):
            return c.group("file"), int(c.group("line"))
    return file, line


def quote_line(source, filename, file, line, column=None):
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
        if not is_internal(note.group("file")):
            out.append(text)
            keep_quote = True
        elif not ENGINE_NAME.search(cuda_names(note.group("msg"))) and f"note: {note.group('msg')}" not in out:
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
    return sorted(n for n in names if not (ENGINE_NAME.search(n) or n.startswith(builtin) or n.endswith("__")))


_NOT_IN_CG = re.compile(r"^(?:‘(?P<gcc_name>\w+)’ is not a member of ‘(?:cg|cooperative_groups)’|no member named "
                        r"'(?P<name>\w+)' in namespace '(?:cg|cooperative_groups)')")
_CG_PROVIDED = ("thread_block, thread_block_tile and tiled_partition, coalesced_group and coalesced_threads, "
                "labeled_partition, binary_partition, cg::reduce and the scans, memcpy_async")


def _suggest_cuda_name(msg):
    """clang's "use of undeclared identifier" with the CUDA name it is close to, where clang made no
    suggestion (zig's clang turns spelling suggestions off): "did you mean '__syncthreads'?"; for
    an undeclared ``__name`` (g++ or clang) nothing close to: that the engine may lack that intrinsic;
    and for a cooperative-groups name the engine lacks, that it lacks it."""
    cg = _NOT_IN_CG.match(msg)
    if cg:
        name = cg.group("name") or cg.group("gcc_name")
        return (f"{msg}: pmpp's CPU engine does not provide cooperative_groups::{name} (it has "
                f"{_CG_PROVIDED}; its README, Supported CUDA)")
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
            unclosed = unclosed_brace(source or "", filename)
            if unclosed is not None:      # the registration came out inside the user's function
                where, at = unclosed
                return CompileError(f"{where}:{at}: this '{{' is never closed: the file ends inside it "
                                    "(a missing '}'?)", filename=where, line=at, log=log)
            entry = line - 2
            name = names[entry] if 0 <= entry < len(names) else "?"
            origin = "kernel_names" if entry < n_kernel_names else "name_expressions"
            return CompileError(
                f"{filename}: cannot make '{name}' (from {origin}) a launchable kernel: {msg}. "
                f"It must name a __global__ function of {filename}"
                f"{' with its template arguments' if origin == 'name_expressions' else ''}.",
                filename=filename, line=None, log=log)
        column = _COLUMN.match(text)
        quote = [] if is_internal(file) else [
            q for q in itertools.takewhile(_EXCERPT.match, lines[idx + 1:])
            if not (_FIX_IT.match(q) and ENGINE_NAME.search(cuda_names(q)))]  # a dropped suggestion's
        if is_internal(file):
            file, line = _user_location(lines, idx, file, line)
            column = None
        if not quote:
            quote = quote_line(source, filename, file, line, column and int(column.group("column")))
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
            if is_internal(file):
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


_LINE_DIRECTIVE = re.compile(r'^[ \t]*#[ \t]*line[ \t]+(\d+)(?:[ \t]+"([^"]*)")?', re.M)


def unclosed_brace(source: str, filename: str):
    """(file, line) of the first ``{`` of ``source`` (with its #line directives) that nothing closes,
    or None: where a file cut short, or missing a ``}``, ends."""
    code = re.sub(r"'(?:\\.|[^'\\\n])'", "' '", strip_comments(source))
    file, line, opened = filename, 1, []
    for number, text in enumerate(code.split("\n")):
        directive = _LINE_DIRECTIVE.match(text)
        if directive:
            line, file = int(directive.group(1)), directive.group(2) or file
            continue
        for char in text:
            if char == "{":
                opened.append((file, line))
            elif char == "}" and opened:
                opened.pop()
        line += 1
    return opened[0] if opened else None
