"""The CPU engine's build with each C++ compiler family: the flags chosen for g++ and clang,
$PMPP_CXX as a command with arguments, Boost.Context as a .so or a .dylib, and the runtime and
kernel modules cross-compiled for macOS (Apple silicon and Intel) with zig's clang, so that a
change that breaks the macOS build fails here on Linux. (Running the engine's tests under clang
is CI's second pass: .ci/run.)"""
import importlib.util
import re
import shutil
import struct
import sys
from pathlib import Path

import pytest

from pmpp.backends.cpu import build, toolchain
from pmpp.errors import BackendUnavailableError

ROOT = Path(__file__).resolve().parent.parent
TEST_KERNELS = sorted((ROOT / "tests" / "cpu_kernels").glob("*.cu"))
ZIG_CXX = f"{sys.executable} -m ziglang c++"
MACOS_TARGETS = {"aarch64-macos": 0x0100000C, "x86_64-macos": 0x01000007}   # Mach-O CPU types


needs_zig = pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                               reason="needs the ziglang wheel (pip install ziglang)")


@pytest.fixture
def zig(monkeypatch):
    monkeypatch.setenv("PMPP_CXX", ZIG_CXX)


# ---- compiler families and their flags -------------------------------------------------------

@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
def test_gcc_gets_its_own_sanitizer_parameters(monkeypatch):
    monkeypatch.setenv("PMPP_CXX", shutil.which("g++"))
    cc = toolchain.cxx()
    assert cc.family == "gcc" and cc.name == "g++" and not cc.macos
    checked = cc.mode_flags(check=True, count=False)
    assert checked[checked.index("tsan-distinguish-volatile=1") - 1] == "--param"
    assert "-mllvm" not in checked
    assert "-fno-gnu-unique" in cc.common_flags()
    assert {"-fsanitize-coverage=trace-pc", "-fno-tree-sra"} <= set(cc.mode_flags(check=True, count=True))
    assert cc.shared_library_flags("libx.so")[-1] == "-Wl,-soname,libx.so"


@needs_zig
def test_pmpp_cxx_is_a_command_with_arguments(zig):
    cc = toolchain.cxx()
    assert cc.command == tuple(ZIG_CXX.split())
    assert cc.family == "clang" and cc.name == "clang++" and cc.version.startswith("clang version")
    checked = cc.mode_flags(check=True, count=False)
    assert "--param" not in checked and "-fno-gnu-unique" not in cc.common_flags()
    settings = [checked[i + 1] for i, flag in enumerate(checked) if flag == "-mllvm"]
    assert {"-tsan-instrument-func-entry-exit=0", "-tsan-distinguish-volatile=1"} <= set(settings)
    counted = cc.mode_flags(check=True, count=True)
    assert "-fsanitize-coverage=bb,trace-pc" in counted and "-fno-tree-sra" not in counted


@needs_zig
def test_the_compiler_is_part_of_the_cache_key(zig, monkeypatch):
    # where each compiler's runtime goes (building clang's takes minutes: the clang pass of CI does)
    clang_runtime = toolchain.runtime_path()
    monkeypatch.setenv("PMPP_CXX", shutil.which("g++") or pytest.skip("needs g++"))
    gcc_runtime = toolchain.runtime_path()
    assert gcc_runtime != clang_runtime and gcc_runtime == toolchain.runtime_library()


def test_a_compiler_that_is_neither_gcc_nor_clang_is_refused(monkeypatch):
    monkeypatch.setenv("PMPP_CXX", f"{sys.executable} -c pass")   # runs, predefines nothing
    with pytest.raises(BackendUnavailableError, match="needs g\\+\\+ or clang, and \\$PMPP_CXX=.* is neither"):
        toolchain.cxx()


def test_a_compiler_that_does_not_run_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_CXX", f"{tmp_path / 'no-such-c++'} --flag")
    with pytest.raises(BackendUnavailableError, match="cannot run .*no-such-c\\+\\+ --flag"):
        toolchain.cxx()


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
def test_gcc_is_not_asked_to_cross_compile(monkeypatch):
    monkeypatch.setenv("PMPP_CXX", shutil.which("g++"))
    with pytest.raises(BackendUnavailableError, match="set \\$PMPP_CXX to a clang"):
        toolchain.cxx("aarch64-macos")


@pytest.mark.parametrize("library", ["libboost_context.so.1.90.0", "libboost_context.dylib"])
def test_boost_context_is_found_as_a_so_or_a_dylib(tmp_path, monkeypatch, library):
    (tmp_path / "include/boost/context/detail").mkdir(parents=True)
    (tmp_path / "include/boost/context/detail/fcontext.hpp").touch()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / library).touch()

    class Wheel:
        def locate_file(self, name):
            return tmp_path

    monkeypatch.setattr(toolchain.metadata, "distribution", lambda name: Wheel())
    toolchain.boost.cache_clear()
    try:
        assert toolchain.boost() == (str(tmp_path / "include"), str(tmp_path / "lib"))
    finally:
        toolchain.boost.cache_clear()


# ---- macOS, cross-compiled -------------------------------------------------------------------

LC_ID_DYLIB, LC_LOAD_DYLIB, LC_RPATH = 0xD, 0xC, 0x8000001C
MH_MAGIC_64, MH_DYLIB = 0xFEEDFACF, 6


def mach_o(path):
    """(CPU type, file type, {load command: [the names or paths it holds]}) of a 64-bit Mach-O file."""
    data = Path(path).read_bytes()
    magic, cputype, _, filetype, ncmds, _, _, _ = struct.unpack_from("<IiiIIIII", data)
    assert magic == MH_MAGIC_64, f"{path} is not a 64-bit Mach-O file"
    commands, offset = {}, 32
    for _ in range(ncmds):
        cmd, size, name_offset = struct.unpack_from("<III", data, offset)
        if cmd in (LC_ID_DYLIB, LC_LOAD_DYLIB, LC_RPATH):
            name = data[offset + name_offset:offset + size].split(b"\0")[0].decode()
            commands.setdefault(cmd, []).append(name)
        offset += size
    return cputype, filetype, commands


def kernel_names(path):
    return re.findall(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)', path.read_text())


@needs_zig
def test_asking_the_compiler_about_a_target_leaves_no_files_behind(zig, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    toolchain._compiler.cache_clear()
    toolchain._predefined_macros.cache_clear()
    assert toolchain.cxx("aarch64-macos").macos
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@needs_zig
@pytest.mark.parametrize("target", MACOS_TARGETS)
def test_runtime_and_modules_build_for_macos(zig, target):
    runtime = toolchain.runtime_library(target)
    cputype, filetype, commands = mach_o(runtime)
    assert (cputype, filetype) == (MACOS_TARGETS[target], MH_DYLIB)
    assert runtime.suffix == ".dylib" and commands[LC_ID_DYLIB] == [f"@rpath/{runtime.name}"]
    # every test kernel built plain, and misc.cu in the checked and the counted builds too (the
    # other kernels' checked and counted builds are the host's business: the clang pass of CI)
    for path in TEST_KERNELS:
        names = kernel_names(path)
        for check, count in ([(False, False), (True, False), (True, True)] if path.name == "misc.cu"
                             else [(False, False)]):
            module = build.build_module(path.read_text(), filename=path.name, options=[], names=names,
                                        n_kernel_names=len(names), check=check, count=count, target=target).path
            cputype, filetype, commands = mach_o(module)
            assert (cputype, filetype) == (MACOS_TARGETS[target], MH_DYLIB), module
            assert f"@rpath/{runtime.name}" in commands[LC_LOAD_DYLIB], module
            assert str(runtime.parent) in commands[LC_RPATH], module
            # Apple's linker leaves the debug information in the object file the library names
            assert module.with_suffix(".o").exists()
