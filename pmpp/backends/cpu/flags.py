"""NVRTC-style options as the C++ compiler's flags, and the user headers a build read (their
digests tell when a cached build is stale).
"""

import hashlib
import json
import os
import re
from pathlib import Path

from pmpp.backends.cpu.toolchain import INCLUDE_DIR, tmp_name


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
    tmp = tmp_name(header)
    tmp.write_text(macros)
    os.replace(tmp, header)
    return rest, ["-include", str(header)], header


def header_digests(dep_file, *generated):
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


def headers_current(deps_json):
    """Whether every user header a cached build read (``header_digests``, as JSON in ``deps_json``)
    is unchanged."""
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
