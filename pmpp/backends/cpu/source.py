"""Prepare a CUDA source for g++: rewrite ``__shared__`` declarations into runtime calls,
reject what the CPU engine cannot run, and append the module's kernel table.

Every rewrite stays on the line it replaces (a statement spread over several lines leaves the
following lines empty), so ``#line`` numbering and therefore g++'s messages, ``__LINE__`` and
the debug info keep pointing at the student's ``.cu`` lines.
"""

import re

from pmpp.errors import CompileError

import pmpp.backends.cpu.ptx as ptx

REGISTRATION_FILE = "<pmpp kernel table>"

_SHARED = re.compile(r"\b__shared__\b")
_QUALIFIER_AT_END = re.compile(
    r"(?:\b(?:static|volatile|extern|const|__device__)\b|__align__\s*\(\s*[^()]*\)"
    r"|alignas\s*\([^()]*\))\s*$"
)
# What may stand before __shared__ in a declaration: types, qualifiers, alignment and template
# arguments (not an expression or a label).
_DECL_SPECIFIERS = re.compile(r"(?:\s|\w|::|<[\w\s:,<>*]*>|\*|__align__\s*\(\s*[^()]*\)|alignas\s*\([^()]*\))*")
_ALIGN = re.compile(r"__align__\s*\(([^()]*)\)|alignas\s*\(([^()]*)\)")
_LINE_DIRECTIVE = re.compile(r'\s*#\s*(?:line\s+)?(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?')


def mask_code(src):
    """``src`` with comments and the contents of string and character literals blanked
    (newlines kept), so that searching it finds only code."""
    out = list(src)
    n = len(src)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and nxt == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"' and i > 0 and src[i - 1] == "R" and (i < 2 or not (src[i - 2].isalnum() or src[i - 2] == "_")):
            m = re.match(r'"([^()\\\s]{0,16})\(', src[i:])
            if not m:
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 1
            blank(i + 1, end)
            i = end + 1
        elif c in "\"'":
            if c == "'" and _is_digit_separator(src, i):
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _is_digit_separator(src, i):
    """A ' inside a number literal (C++14 digit separator, 1'000'000)."""
    k = i
    while k > 0 and (src[k - 1].isalnum() or src[k - 1] in "_'."):
        k -= 1
    return k < i and src[k].isdigit()


def locate(src, pos, filename):
    """(file, line) of offset ``pos`` in ``src``, following ``#line`` directives."""
    line, file = 1, filename
    for text in src[:pos].split("\n")[:-1]:
        m = _LINE_DIRECTIVE.match(text) if text.lstrip().startswith("#") else None
        if m and re.match(r"\s*#\s*(line\b|\d)", text):
            line, file = int(m.group(1)), m.group(2) or file
        else:
            line += 1
    return file, line


def _fail(src, pos, filename, message):
    file, line = locate(src, pos, filename)
    raise CompileError(f"{file}:{line}: {message}", filename=file, line=line,
                       log=f"{file}:{line}: error: {message}")


def _split_top_level(text, sep=","):
    parts, depth, angle, cur = [], 0, 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and depth == 0:  # template arguments; '<' inside [] is a comparison
            angle += 1
        elif ch == ">" and depth == 0 and angle:
            angle -= 1
        if ch == sep and depth == 0 and angle == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _parse_declarator(text):
    """'float *tile[N][M]' -> ('float *', 'tile', ['[N]', '[M]'])."""
    text = text.strip()
    dims = []
    while text.endswith("]"):
        depth, k = 0, len(text) - 1
        while k >= 0:
            if text[k] == "]":
                depth += 1
            elif text[k] == "[":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        if k < 0:
            return None
        dims.insert(0, text[k:])
        text = text[:k].rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", text)
    if not m:
        return None
    return text[: m.start()].strip(), m.group(1), dims


def _scope_at(masked, pos):
    """'namespace', 'class' or 'function': the kind of scope ``pos`` lies in."""
    stack, head_start = [], 0
    for m in re.finditer(r"[{};]", masked[:pos]):
        ch = m.group()
        if ch == "{":
            head = masked[head_start:m.start()]
            if re.search(r"\bnamespace\b[\w\s:]*$", head) or re.search(r'\bextern\s*"[^"]*"\s*$', head):
                stack.append("namespace")
            elif re.search(r"\b(struct|class|union)\b[^()=]*$", head):
                stack.append("class")
            else:
                stack.append("function")
        elif ch == "}" and stack:
            stack.pop()
        head_start = m.end()
    if not stack or all(s == "namespace" for s in stack):
        return "namespace"
    return stack[-1] if stack[-1] == "class" else "function"


def _directive_end(masked, pos):
    """If ``pos`` lies in a preprocessor directive, the offset where the directive ends."""
    start = masked.rfind("\n", 0, pos) + 1
    while start > 1 and masked[start - 2] == "\\":
        start = masked.rfind("\n", 0, start - 1) + 1
    if not masked[start:pos].lstrip().startswith("#"):
        return None
    end = pos
    while True:
        end = masked.find("\n", end)
        if end < 0:
            return len(masked)
        if masked[end - 1] != "\\":
            return end
        end += 1


def _statement_start(masked, pos):
    """Where the statement holding offset ``pos`` starts: after the last ``;``, ``{`` or ``}``
    before it, or after a preprocessor line between that and ``pos``."""
    start = max(masked.rfind(ch, 0, pos) for ch in ";{}") + 1
    directives = list(re.finditer(r"^[ \t]*#[^\n]*\n", masked[start:pos], re.M))
    return start + (directives[-1].end() if directives else 0)


class _SharedRewriter:
    def __init__(self, src, masked, filename):
        self.src, self.masked, self.filename = src, masked, filename
        self.counter = 0

    def fail(self, pos, message):
        _fail(self.src, pos, self.filename, message)

    def rewrite(self, match):
        """(start, end, replacement) for the __shared__ declaration at ``match``."""
        masked = self.masked
        limit = _directive_end(masked, match.start()) or len(masked)
        start = self._declaration_start(match.start())
        depth, end = 0, None
        for k in range(match.end(), limit):
            ch = masked[k]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == ";" and depth == 0:
                end = k
                break
            elif ch in "{}" and depth == 0:
                break
        if end is None:
            if limit < len(masked):
                return None  # inside a macro without its ';': the prelude's static_assert explains
            self.fail(match.start(), "cannot parse this __shared__ declaration: write it as one "
                      "statement ending in ';', e.g. __shared__ float tile[TILE][TILE];")
        decl = masked[start:end]
        scope = _scope_at(masked, start)
        if scope == "class":
            self.fail(match.start(), "__shared__ members of a struct or class are not supported "
                      "by pmpp's CPU engine: declare the __shared__ variable in the kernel body")
        replacement = self._replacement(decl, scope, match.start())
        newlines = self.src.count("\n", start, end + 1)
        in_directive = limit < len(masked)
        replacement += ("\\\n" if in_directive else "\n") * newlines
        return start, end + 1, replacement

    def _declaration_start(self, shared_at):
        """Where the declaration holding ``__shared__`` begins: the start of its statement when
        only types and qualifiers precede ``__shared__`` there (``extern float __shared__ t[];``,
        as CUDA allows), else the first of the qualifiers just before it."""
        masked = self.masked
        head_start = _statement_start(masked, shared_at)
        head = masked[head_start:shared_at]
        if head.strip() and _DECL_SPECIFIERS.fullmatch(head):
            return head_start + len(head) - len(head.lstrip())
        start = shared_at
        while True:
            q = _QUALIFIER_AT_END.search(masked, 0, start)
            if not q:
                return start
            start = q.start()

    def _replacement(self, decl, scope, pos):
        align = None
        for m in _ALIGN.finditer(decl):
            align = (m.group(1) or m.group(2)).strip()
        body = _ALIGN.sub(" ", decl)
        is_extern = re.search(r"\bextern\b", body) is not None
        body = re.sub(r"\b(static|extern|__shared__|__device__)\b", " ", body)
        body = " ".join(body.split())
        declarators = _split_top_level(body)
        if any(len(_split_top_level(d, "=")) > 1 for d in declarators):
            self.fail(pos, "a __shared__ variable cannot have an initializer (CUDA does not allow "
                      "one either): assign it in the kernel, then __syncthreads()")
        first = _parse_declarator(declarators[0])
        if first is None or not first[0]:
            self.fail(pos, "cannot parse this __shared__ declaration: write one variable per "
                      "statement, e.g. __shared__ float tile[TILE][TILE];")
        base_type = first[0].rstrip("*& ")
        parts = []
        for k, text in enumerate(declarators):
            parsed = first if k == 0 else _parse_declarator(base_type + " " + text.strip())
            if parsed is None:
                self.fail(pos, "cannot parse this __shared__ declaration: write one variable per "
                          "statement, e.g. __shared__ float tile[TILE][TILE];")
            type_part, name, dims = parsed
            parts.append(self._one(type_part, name, dims, is_extern, align, scope, pos))
        return " ".join(parts)

    def _one(self, type_part, name, dims, is_extern, align, scope, pos):
        self.counter += 1
        t = f"__pmpp_shared_t{self.counter}"
        if is_extern:
            elem = f"typedef {type_part} {t}{''.join(dims[1:])};"
            if scope == "namespace":
                return f'{elem} static const ::pmpp::DynamicSharedArray<{t}> {name}{{"{name}"}};'
            return f'{elem} {t}* {name} = ::pmpp::dynamic_shared<{t}>("{name}");'
        if scope == "namespace":
            self.fail(pos, f"__shared__ variable '{name}' at namespace scope is not supported by "
                      "pmpp's CPU engine: declare it inside the kernel (or __device__ function) "
                      "that uses it")
        site = f"__pmpp_shared_s{self.counter}"
        align_arg = f", {align}" if align else ""
        return (f"typedef {type_part} {t}{''.join(dims)}; static char {site}; "
                f'auto& {name} = ::pmpp::shared_var<{t}{align_arg}>(&{site}, "{name}");')


def rewrite(src, filename):
    """The source g++ compiles: ``__shared__`` declarations become runtime calls,
    ``__noinline__`` an attribute; unsupported constructs raise CompileError."""
    masked = mask_code(src)
    for pattern, message in (
        (r"<<<", "kernel launches inside a kernel (dynamic parallelism, <<<...>>>) are not "
                 "supported by pmpp's CPU engine: launch kernels from Python"),
    ):
        m = re.search(pattern, masked)
        if m:
            _fail(src, m.start(), filename, message)

    edits = []
    rewriter = _SharedRewriter(src, masked, filename)
    for m in _SHARED.finditer(masked):
        if edits and m.start() < edits[-1][1]:
            continue  # part of a declaration already rewritten
        edit = rewriter.rewrite(m)
        if edit:
            edits.append(edit)
    edits += ptx.asm_edits(src, masked, lambda pos, message: _fail(src, pos, filename, message))
    for m in re.finditer(r"\b__noinline__\b", masked):
        edits.append((m.start(), m.end(), "__attribute__((noinline))"))
    edits += _static_constant_edits(masked)
    edits.sort()
    out, last = [], 0
    for start, end, text in edits:
        out.append(src[last:start])
        out.append(text)
        last = end
    out.append(src[last:])
    return "".join(out)


def _static_constant_edits(masked):
    """Edits that drop ``static`` from ``static __constant__`` variables: copy_to_symbol finds a
    variable by its name in the module's symbol table, where g++ leaves out static ones (the
    module is a single translation unit, so the linkage changes nothing else)."""
    edits = []
    for m in re.finditer(r"\b__constant__\b", masked):
        start = _statement_start(masked, m.start())
        ends = [k for k in (masked.find(ch, m.end()) for ch in "=;{(") if k >= 0]
        if not ends or _scope_at(masked, m.start()) != "namespace":
            continue
        for word in re.finditer(r"\bstatic\b", masked[start:min(ends)]):
            edits.append((start + word.start(), start + word.end(), " " * len("static")))
    return edits


def kernel_table(names):
    """C++ appended to the module: the table of launchable kernels, one entry per line (so that a
    g++ error on line k of REGISTRATION_FILE names entry k-1)."""
    lines = ["", f'#line 1 "{REGISTRATION_FILE}"',
             'extern "C" const pmpp_kernel_entry pmpp_module_kernels[] = {']
    for name in names:
        literal = name.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'    ::pmpp::kernel_entry<&({name})>("{literal}"),')
    lines.append("    {nullptr, nullptr, 0, nullptr}};")
    lines.append(f'extern "C" const int pmpp_module_kernel_count = {len(names)};')
    return "\n".join(lines) + "\n"


# Element sizes of the types a __constant__ array is usually declared with.
_SCALAR_SIZES = {"char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "short": 2,
                 "unsigned short": 2, "__half": 2, "int": 4, "unsigned": 4, "unsigned int": 4,
                 "float": 4, "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8,
                 "double": 8, "int2": 8, "float2": 8, "int4": 16, "float4": 16, "double2": 16}


def constant_symbols(src):
    """Names of the ``__constant__`` variables declared in ``src``."""
    return [name for name, _ in _constant_declarations(src)]


def constant_elements(src):
    """``(name, element size, element type)`` of each ``__constant__`` variable of ``src``; an
    element type it does not know is ``(name, 1, "")``."""
    found = []
    for name, base in _constant_declarations(src):
        base = " ".join(base.replace("*", " ").split())
        found.append((name, _SCALAR_SIZES[base], base) if base in _SCALAR_SIZES else (name, 1, ""))
    return found


def _constant_declarations(src):
    """``(name, base type)`` of the ``__constant__`` variables declared in ``src``."""
    masked = mask_code(src)
    names = []
    for m in re.finditer(r"\b__constant__\b", masked):
        end = masked.find(";", m.end())
        if end < 0:
            continue
        decl = re.sub(r"\b(static|extern|const|volatile|__constant__|__device__)\b|__align__\s*\([^()]*\)",
                      " ", masked[m.end():end])
        base = None
        for part in _split_top_level(decl):
            head = " ".join(_split_top_level(part, "=")[0].split())
            parsed = _parse_declarator(head if base is None else f"{base} {head}")
            if parsed and parsed[0]:
                base = base or parsed[0].rstrip("*& ")
                names.append((parsed[1], base))
    return names
