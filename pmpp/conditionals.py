"""The branches of ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` a compiler would skip, so that
a kernel inside ``#if 0`` (or under a macro the user's ``-D`` options leave undefined) is no kernel.

What is decided: conditions on integer literals, on macros defined by ``-D``/``-U`` options or by
``#define``/``#undef`` earlier in the text (object-like ones with an integer value, or any for
``defined``), with C's operators; an identifier nothing defines counts 0, as in C. What is not: a
condition naming the compiler's own macros (``__CUDA_ARCH__``, ``__CUDACC__``: names starting with
``__``), a function-like macro, or a header's macros - then every branch of that ``#if`` is kept, as
if there were no directive (the compiler decides, and a kernel it skips fails to build, as before).
"""
from __future__ import annotations

import re
from typing import Mapping

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$")
_DEFINED = re.compile(r"\bdefined\s*(?:\(\s*(\w+)\s*\)|(\w+))")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_INTEGER = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b")
_ALLOWED = re.compile(r"^[\d\s()+\-*/%<>=!&|^~]*$")
UNKNOWN = object()    # a macro whose value cannot be told here


def macros_of(options) -> dict[str, object]:
    """The macros NVRTC-style ``options`` define (``-DN``, ``-DN=v``, ``--define-macro=N=v``; ``-U``
    removes): name -> its text ("1" for ``-DN``)."""
    macros: dict[str, object] = {}
    opts = [str(o) for o in options]
    i = 0
    while i < len(opts):
        opt, value = opts[i], None
        for short, long in (("-D", "--define-macro"), ("-U", "--undefine-macro")):
            if opt in (short, long) and i + 1 < len(opts):
                value, i = opts[i + 1], i + 1
            elif opt.startswith(long + "="):
                value = opt[len(long) + 1:]
            elif opt.startswith(short) and len(opt) > 2:
                value = opt[2:]
            if value is not None:
                name, has_value, text = value.partition("=")
                if short == "-U":
                    macros.pop(name, None)
                else:
                    macros[name] = text if has_value else "1"
                break
        i += 1
    return macros


def active_code(code: str, macros: Mapping[str, object] | None = None) -> str:
    """``code`` (comments already removed) with the lines of branches a compiler skips blanked,
    newlines kept so that line numbers stay put."""
    defined = dict(macros or {})
    lines = code.split("\n")
    out = []
    stack: list[list] = []     # per open #if: [parent active, this branch active, a branch taken (None: unknown)]
    i = 0
    while i < len(lines):
        line, first = lines[i], i
        while line.endswith("\\") and i + 1 < len(lines):    # a directive continued on the next line
            i += 1
            line = line[:-1] + " " + lines[i]
        active = all(frame[1] for frame in stack)
        match = _DIRECTIVE.match(line)
        kept = _directive(match, stack, defined, active) if match else active
        out.extend([lines[k] if kept else "" for k in range(first, i + 1)])
        i += 1
    return "\n".join(out)


def _directive(match, stack, defined, active) -> bool:
    """Update ``stack`` and ``defined`` for one directive; whether to keep its line."""
    word, rest = match.group(1), match.group(2).strip()
    if word in ("if", "ifdef", "ifndef"):
        value = _condition(word, rest, defined) if active else False
        stack.append([active, value is not False, None if value is UNKNOWN else bool(value)])
        return active
    if not stack:
        if word in ("define", "undef") and active:
            _define(word, rest, defined)
        return active
    frame = stack[-1]
    if word == "endif":
        stack.pop()
        return frame[0]
    if word in ("elif", "else"):
        if not frame[0]:
            return False
        if frame[2] is True:                  # a branch was taken: this one is not
            frame[1] = False
            return True
        value = True if word == "else" else _condition("if", rest, defined)
        if frame[2] is None:                  # an undecided branch before: keep this one too
            frame[1] = True
        else:
            frame[1] = value is not False
            frame[2] = None if value is UNKNOWN else bool(value)
        return True
    if active:
        _define(word, rest, defined)
    return active


def _define(word, rest, defined) -> None:
    name_match = re.match(r"(\w+)(\()?\s*(.*)", rest)
    if not name_match:
        return
    name, function_like, value = name_match.groups()
    if word == "undef":
        defined.pop(name, None)
    else:
        defined[name] = UNKNOWN if function_like else value.strip()


def _condition(word: str, rest: str, defined) -> object:
    """True, False, or UNKNOWN."""
    if word in ("ifdef", "ifndef"):
        name = rest.split()[0] if rest.split() else ""
        if name.startswith("__") and name not in defined:
            return UNKNOWN
        return (name in defined) == (word == "ifdef")
    unknown = False

    def is_defined(m):
        nonlocal unknown
        name = m.group(1) or m.group(2)
        if name.startswith("__") and name not in defined:
            unknown = True
        return "1" if name in defined else "0"

    expression = _DEFINED.sub(is_defined, rest)
    for _ in range(8):                       # macros whose values are other macros
        expression, again = _substitute(expression, defined)
        if not again:
            break
    if unknown or expression is UNKNOWN:
        return UNKNOWN
    return _evaluate(expression)


def _substitute(expression, defined):
    again = False
    unknown = False

    def value_of(m):
        nonlocal again, unknown
        name = m.group(0)
        if name not in defined:
            if name.startswith("__"):
                unknown = True
            return "0"
        value = defined[name]
        if value is UNKNOWN:
            unknown = True
            return "0"
        again = True
        return f"({value or '0'})"

    text = _IDENTIFIER.sub(value_of, _INTEGER.sub(lambda m: str(int(m.group(1), 0)), expression))
    return (UNKNOWN if unknown else text), again and not unknown


def _evaluate(expression: str) -> object:
    text = _INTEGER.sub(lambda m: str(int(m.group(1), 0)), expression)
    if not _ALLOWED.match(text):
        return UNKNOWN                       # character literals, ?:, casts: the compiler decides
    text = _logical_not(text)
    if text is UNKNOWN:
        return UNKNOWN
    text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))   # digits, operators and parentheses only
    except (SyntaxError, ZeroDivisionError, TypeError, ValueError):
        return UNKNOWN


def _logical_not(text: str) -> object:
    """C's ``!x`` (x a number or a parenthesized group) as ``(x==0)``: it binds tighter than any
    binary operator, which Python's ``not`` does not."""
    while True:
        m = re.search(r"!(?!=)\s*", text)
        if m is None:
            return text
        start, at = m.start(), m.end()
        number = re.match(r"\d+", text[at:])
        if number:
            end = at + number.end()
        elif text[at:at + 1] == "(":
            depth, end = 0, at
            for end in range(at, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            end += 1
        else:
            return UNKNOWN
        text = text[:start] + "(" + text[at:end] + "==0)" + text[end:]
