"""Source lines from a module's DWARF (pmpp/backends/cpu/lines.py), and the worker's end with its
parent: the parts of the CPU engine that differ between Linux and macOS."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from pmpp.backends.cpu import CpuModule, diagnostics, lines, toolchain
from pmpp.source import with_line_directive

ROOT = Path(__file__).resolve().parent.parent
HAVE_ZIG = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True).returncode == 0

HELPER = """\
static inline __attribute__((always_inline)) int twice(volatile int *p) {
    return *p * 2; /* helper line */
}
"""
KERNEL = """\
#include "helper.h"
#line 1 "student/kernel.cu"
int use(volatile int *p) {
    int a = twice(p); /* first call */
    return a + twice(p + 1); /* second call */
}
"""


def line_of(text, marker):
    return next(k for k, line in enumerate(text.splitlines(), 1) if marker in line)


def addr2line_frames(library, offsets):
    """What ``addr2line -i`` says of each offset: ``{offset: [(file, line), ...]}``."""
    out = subprocess.run(["addr2line", "-i", "-a", "-e", str(library), *(f"0x{o:x}" for o in offsets)],
                         capture_output=True, text=True, check=True).stdout
    found, current = {}, None
    for text in out.splitlines():
        if text.startswith("0x"):
            current = found.setdefault(int(text, 16), [])
            continue
        file, _, line = re.sub(r"\s*\(discriminator \d+\)", "", text).strip().rpartition(":")
        if not file.startswith("??") and line.isdigit():
            current.append((file, int(line)))
    return {o: chain for o, chain in found.items() if chain}


def text_offsets(library):
    with open(library, "rb") as stream:
        text = ELFFile(stream).get_section_by_name(".text")
        return range(text["sh_addr"], text["sh_addr"] + text["sh_size"])


@pytest.fixture(scope="module")
def built_modules():
    chapter = ROOT / "kernels" / "reduction" / "13_reduce6.cu"
    tests = ROOT / "tests" / "cpu_kernels" / "shared.cu"
    tests_src = tests.read_text()
    return [   # as pmpp.load builds them: #line names the .cu file
        CpuModule(with_line_directive(chapter.read_text(), "reduction/13_reduce6.cu"),
                  filename=chapter.name, name_expressions=["reduce6<256>"], check=True).library_path,
        CpuModule(with_line_directive(tests_src, tests.name), filename=tests.name, count=True,
                  kernel_names=re.findall(r"__global__\s+void\s+(\w+)", tests_src)).library_path,
    ]


@pytest.mark.skipif(shutil.which("addr2line") is None, reason="compares with binutils' addr2line")
def test_frames_equal_addr2line_at_every_code_offset_of_built_modules(built_modules):
    for library in built_modules:
        offsets = text_offsets(library)
        ours = lines.frames(library, offsets)
        assert any(len(chain) > 1 for chain in ours.values()), "no inlined call seen"
        assert ours == addr2line_frames(library, offsets), library


def test_source_locations_name_the_users_file_not_the_prelude(built_modules):
    library = built_modules[1]
    found = diagnostics.source_locations(library, [o + 1 for o in text_offsets(library)])
    files = {file for file, _ in found.values()}
    assert "shared.cu" in files
    assert not any(f.endswith((".h", ".cpp")) for f in files), files


def test_a_rebuilt_module_is_read_again(tmp_path):
    library = tmp_path / "lib.so"
    compile_small_library(tmp_path, ["cc", "-O1", "-g"], library)
    before = lines.frames(library, text_offsets(library))
    directive = '#line 1 "student/kernel.cu"\n'
    (tmp_path / "kernel.c").write_text(KERNEL.replace(directive, directive + "\n\n"))  # 2 lines down
    time.sleep(0.01)
    compile_small_library(tmp_path, ["cc", "-O1", "-g"], library)
    after = lines.frames(library, text_offsets(library))
    assert {chain[-1][1] + 2 for chain in before.values()} == {chain[-1][1] for chain in after.values()}


def compile_small_library(folder, command, output, *, compile_only=False, source=KERNEL):
    (folder / "helper.h").write_text(HELPER)
    if not (folder / "kernel.c").exists():
        (folder / "kernel.c").write_text(source)
    mode = ["-c"] if compile_only else ["-shared", "-fPIC"]
    subprocess.run([*command, *mode, "kernel.c", "-o", str(output)], cwd=folder, check=True,
                   capture_output=True)


def assert_small_library_lines(chains, folder):
    helper_line = line_of(HELPER, "helper line")
    first_call = line_of(KERNEL, "first call") - line_of(KERNEL, "#line")  # its next line is 1
    user = str(folder / "student" / "kernel.cu")
    chains = [[(os.path.normpath(f), n) for f, n in chain] for chain in chains]
    assert [(str(folder / "helper.h"), helper_line), (user, first_call)] in chains
    assert {chain[-1][0] for chain in chains} == {user}
    assert {chain[-1][1] for chain in chains} <= {1, first_call, first_call + 1, first_call + 2}


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_dwarf_5_line_tables_name_the_line_directive_file(tmp_path):
    library = tmp_path / "lib.so"
    compile_small_library(tmp_path, ["cc", "-O1", "-g", "-gdwarf-5"], library)
    found = lines.frames(library, text_offsets(library))
    assert_small_library_lines(list(found.values()), tmp_path)


def llvm_symbolizer_frames(library, offsets):
    out = subprocess.run(["llvm-symbolizer", f"--obj={library}", "--inlining", *map(hex, offsets)],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for offset, block in zip(offsets, out.split("\n\n")):
        chain = []
        for text in block.splitlines()[1::2]:   # function name, then file:line:column
            file, line, _ = text.rsplit(":", 2)
            if file != "??" and line != "0":
                chain.append((file, int(line)))
        if chain:
            found[offset] = chain
    return found


@pytest.mark.skipif(not HAVE_ZIG or shutil.which("dsymutil") is None,
                    reason="needs the ziglang wheel (a clang for macOS targets) and dsymutil")
@pytest.mark.parametrize("target", ["aarch64-macos", "x86_64-macos"])
def test_macos_library_lines_come_from_a_dsym_made_from_its_object_file(tmp_path, target):
    zig = [sys.executable, "-m", "ziglang", "cc", "-target", target, "-O1", "-g"]
    compile_small_library(tmp_path, zig, tmp_path / "kernel.o", compile_only=True)
    library = tmp_path / "lib.dylib"
    subprocess.run([*zig, "-shared", "kernel.o", "-o", str(library)], cwd=tmp_path, check=True)
    offsets = list(range(library.stat().st_size))
    found = lines.frames(library, offsets)
    assert (tmp_path / "lib.dylib.dSYM").is_dir()
    assert_small_library_lines(list(found.values()), tmp_path)
    if shutil.which("llvm-symbolizer"):
        assert found == llvm_symbolizer_frames(library, sorted(found))


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_worker_dies_with_its_parent(tmp_path, platform):
    if not sys.platform.startswith(("linux", "darwin")):
        pytest.skip("POSIX only")
    if platform == "linux" and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    child = textwrap.dedent(f"""
        import sys, time
        sys.platform = {platform!r}   # "darwin": the watching thread, as on macOS
        from pmpp.backends.cpu import worker
        worker._die_with_parent()
        print("ready", flush=True)
        time.sleep(60)                 # a launch that never ends
    """)
    parent = textwrap.dedent(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        print(child.pid, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, cwd=ROOT,
                         check=True, timeout=60)
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + 10
    while process_running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_running(pid)


def process_running(pid):
    """True while ``pid`` exists and is not a zombie."""
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ZIG, reason="needs the ziglang wheel (a clang for macOS targets)")
@pytest.mark.parametrize("target", ["aarch64-macos", "x86_64-macos"])
def test_runtime_source_compiles_for_macos(tmp_path, target):
    boost_include = toolchain.boost()[0]
    command = [sys.executable, "-m", "ziglang", "c++", "-target", target, "-std=c++17", "-O0", "-fPIC",
               "-iquote", str(toolchain.INCLUDE_DIR), "-c", str(toolchain.RUNTIME_SOURCE),
               "-o", str(tmp_path / "runtime.o")]
    if boost_include:
        command += ["-isystem", boost_include]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
