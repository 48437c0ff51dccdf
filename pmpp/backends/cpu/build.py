"""Kernel modules compiled into the disk cache: ``mod-<key>.so`` (a plain, checked or count
build, keyed by its prepared source, options, compiler, runtime and build mode) with
``mod-<key>.deps.json`` (hashes of the user headers it included). Files are written to a
temporary name and renamed, so several processes can share the cache; one process builds an
entry at a time (:func:`pmpp.paths.building`).
"""

import json
import os
from pathlib import Path
from typing import NamedTuple

import pmpp.backends.cpu.source as _source
import pmpp.paths as _paths
from pmpp.backends.cpu.devicecheck import refuse_host_calls
from pmpp.backends.cpu.diagnostics import compile_error
from pmpp.backends.cpu.flags import header_digests, headers_current, macros_after_prelude, translate_options
from pmpp.backends.cpu.includes import include_dirs, refuse_special_includes
from pmpp.backends.cpu.limits import run_limited
from pmpp.backends.cpu.pch import files as prelude_files, prelude_include
from pmpp.backends.cpu.toolchain import (DEBUG_PREFIX, cache_dir, cxx, digest, engine_digest,
                                         include_path_flags, runtime_library, tmp_name)


class Built(NamedTuple):
    """A compiled module: its library's ``path``, and the device-code checks' ``device_check``
    verdict on its source (a :class:`~pmpp.backends.cpu.devicecheck.Verdict`, whose ``.nvrtc``
    tells whether NVRTC passed it or why it was skipped)."""
    path: Path
    device_check: object


def build_module(src, *, filename, options, names, n_kernel_names, check, count=False, target=None):
    """The compiled module for ``src`` (from the cache when possible), a :class:`Built`: a plain,
    checked (``check``) or count (``count``) build, for the host or for ``target`` (see :func:`cxx`)."""
    cc = cxx(target)
    runtime = runtime_library(target)
    flags = translate_options(options)
    prepared = _source.rewrite(src, filename) + _source.kernel_table(names)
    mode_flags = cc.mode_flags(check, count)
    key = digest(engine_digest(), *cc.identity, runtime.name, prepared, *flags, *mode_flags,
                  *cc.common_flags(), check, count)[:32]
    out_dir = cache_dir()
    so = out_dir / f"mod-{key}{cc.library_suffix}"
    deps_json = out_dir / f"mod-{key}.deps.json"
    # before the cache: a cached build's source is checked again (see devicecheck.py)
    verdict = refuse_host_calls(src, prepared, filename, flags, out_dir, options, names[n_kernel_names:])
    if so.exists() and headers_current(deps_json):
        return Built(so, verdict)
    with _paths.building(out_dir / f"mod-{key}"):
        if so.exists() and headers_current(deps_json):
            return Built(so, verdict)   # another process built it while this one waited
        refuse_special_includes(src, filename, out_dir, include_dirs(flags))
        cpp = out_dir / f"mod-{key}.cpp"
        tmp_cpp = tmp_name(cpp)
        tmp_cpp.write_text(prepared)
        os.replace(tmp_cpp, cpp)
        other_flags, macro_include, macros_h = macros_after_prelude(flags, out_dir, f"mod-{key}")
        tmp_so, tmp_dep = tmp_name(so), tmp_name(out_dir / f"mod-{key}.d")
        obj = out_dir / f"mod-{key}.o"
        tmp_obj = tmp_name(obj)
        # Compile and link separately: the compiler would add its ThreadSanitizer runtime to a
        # -fsanitize=thread link.
        before_prelude = [*cc.common_flags(), *mode_flags, *other_flags,
                          f"-fdebug-prefix-map={out_dir}={DEBUG_PREFIX}", *include_path_flags()]
        prelude = prelude_include(cc, before_prelude, out_dir)
        compile_cmd = [*cc.command, *before_prelude, "-c", *prelude, *macro_include,
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
        deps = header_digests(tmp_dep, cpp, macros_h, *prelude_files(prelude))
        tmp_dep.unlink(missing_ok=True)
        tmp_json = tmp_name(deps_json)
        tmp_json.write_text(json.dumps(deps))
        os.replace(tmp_json, deps_json)
        os.replace(tmp_so, so)
    return Built(so, verdict)
