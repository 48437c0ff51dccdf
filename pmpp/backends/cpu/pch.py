"""The prelude precompiled: a compiler spends about half of a kernel module's compile reading
``pmpp_cuda.h`` and the C++ headers it includes, the same text for every module. For each set of
flags a build uses, the cache keeps ``pch-<key>/pmpp_cuda.h`` (one line that includes the prelude)
beside the prelude precompiled with exactly those flags (``pmpp_cuda.h.gch`` for g++,
``pmpp_cuda.h.pch`` for clang); a compile that force-includes the one-line header reads the
precompiled form instead (GCC's "Using Precompiled Headers"; clang's driver does the same for
``-include``). Where there is none (a precompile that failed) or g++ finds it does not fit, the
compiler reads the one-line header, that is the prelude itself: the module is the same either way.
"""
import os

import pmpp.paths as _paths
from pmpp.backends.cpu.limits import run_limited
from pmpp.backends.cpu.toolchain import INCLUDE_DIR, digest, engine_digest, tmp_name

PRELUDE = "pmpp_cuda.h"


def prelude_include(cc, flags, out_dir):
    """The options that force-include the prelude into a compile by ``cc`` with ``flags`` (every
    option before the source's own: mode, user options, include directories), building its
    precompiled form in ``out_dir`` first."""
    folder = out_dir / f"pch-{digest(engine_digest(), *cc.identity, *flags)[:24]}"
    header, failed = folder / PRELUDE, folder / "failed"
    gch = folder / f"{PRELUDE}{'.gch' if cc.family == 'gcc' else '.pch'}"
    if not (gch.exists() or failed.exists()):
        with _paths.building(folder):
            if not (gch.exists() or failed.exists()):
                _precompile(cc, flags, folder, header, gch, failed)
    return ["-include", str(header)]


def files(include):
    """The files of the cache a compile given ``include`` (from :func:`prelude_include`) reads
    for the prelude: not the user's headers, whose changes rebuild a module."""
    path = include[-1]
    return [path, f"{path}.gch", f"{path}.pch"]


def _precompile(cc, flags, folder, header, gch, failed):
    folder.mkdir(exist_ok=True)
    if not header.exists():
        tmp = tmp_name(header)
        tmp.write_text(f'#include "{INCLUDE_DIR / PRELUDE}"\n')
        os.replace(tmp, header)
    tmp_gch = tmp_name(gch)
    try:
        # clang checks a precompiled header's inputs by size and time; the key holds their text
        timeless = [] if cc.family == "gcc" else ["-Xclang", "-fno-pch-timestamp"]
        status, _ = run_limited([*cc.command, *flags, *timeless, "-x", "c++-header", str(header),
                                 "-o", str(tmp_gch)], folder, PRELUDE)
        if status == 0:
            os.replace(tmp_gch, gch)
        else:   # the module's own compile says why; it reads the prelude itself
            failed.touch()
    finally:
        tmp_gch.unlink(missing_ok=True)
