"""Compiling a submission is contained: g++ runs under a wall-clock timeout and limits on CPU
time, memory and file size, in a process group that is stopped whole, and ``#include`` of device
and system files is refused before g++ starts. A relative $PMPP_CACHE_DIR works."""

import os
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from pmpp.backends.cpu import CpuModule, toolchain
from pmpp.errors import CompileError

FILENAME = "submission.cu"

KERNEL = """
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""

# Each instance costs g++ about 2 s of CPU, under its per-evaluation operation limit: together
# they keep it busy for a minute or more, with constant memory.
SLOW_CONSTEXPR = """
constexpr long spin(long k) {
    long x = 0;
    for (long i = 0; i < 1000; ++i)
        for (long j = 0; j < 2000; ++j) x += i ^ j ^ k;
    return x;
}
template <int K> constexpr long total = spin(K) + total<K - 1>;
template <> constexpr long total<0> = spin(0);
__global__ void slow(long* out) { *out = total<40>; }
"""


def compile_submission(code, **options):
    source = f'#line 1 "{FILENAME}"\n{code}'
    return CpuModule(source, filename=FILENAME, **options)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh module cache (the runtime library stays where it was built)."""
    toolchain.runtime_library()
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    return tmp_path


def processes_mentioning(text):
    """Command lines of the running processes that name ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and text in cmdline:
            found.append(cmdline)
    return found


def assert_compile_stopped(code, expected, within_s, cache):
    start = time.monotonic()
    with pytest.raises(CompileError) as err:
        compile_submission(code, kernel_names=["slow"])
    elapsed = time.monotonic() - start
    assert expected in str(err.value)
    assert elapsed < within_s, f"stopped only after {elapsed:.1f} s"
    assert processes_mentioning(str(cache)) == []
    return str(err.value)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/stdin"])
def test_include_of_a_device_file_is_refused_before_compiling(cache, device):
    code = f'// reads the grader\'s memory\n#include "{device}"\n{KERNEL}'
    start = time.monotonic()
    with pytest.raises(CompileError) as err:
        compile_submission(code, kernel_names=["add_one"])
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert message.startswith(f'{FILENAME}:2: #include "{device}" refused')
    assert "device or system file" in message and "Include only header files" in message
    assert (err.value.filename, err.value.line) == (FILENAME, 2)
    assert not list(cache.glob("cpu/mod-*.cpp")), "g++ was not to be started"


def test_include_of_a_device_file_from_a_user_header_is_refused(cache, tmp_path):
    headers = tmp_path / "headers"
    headers.mkdir()
    (headers / "helpers.h").write_text('#pragma once\n\n#include </proc/self/environ>\n')
    with pytest.raises(CompileError) as err:
        compile_submission(f'#include "helpers.h"\n{KERNEL}', kernel_names=["add_one"],
                           options=[f"-I{headers}"])
    header = os.path.realpath(headers / "helpers.h")
    assert str(err.value).startswith(f"{header}:3: #include </proc/self/environ> refused")


def test_a_compile_that_never_ends_is_stopped_at_the_timeout(cache, monkeypatch):
    monkeypatch.setenv("PMPP_COMPILE_TIMEOUT", "3")
    monkeypatch.setenv("PMPP_COMPILE_CPU", "600")
    message = assert_compile_stopped(SLOW_CONSTEXPR, f"g++ did not finish compiling {FILENAME} within 3 s",
                                     within_s=15, cache=cache)
    assert "template or constexpr that never ends" in message and "PMPP_COMPILE_TIMEOUT" in message


def test_a_compile_is_stopped_at_its_cpu_time_limit(cache, monkeypatch):
    monkeypatch.setenv("PMPP_COMPILE_CPU", "1")
    message = assert_compile_stopped(SLOW_CONSTEXPR, "g++ used more than 1 s of CPU time",
                                     within_s=15, cache=cache)
    assert "PMPP_COMPILE_CPU" in message


def test_an_include_built_by_a_macro_is_stopped_by_the_memory_limit(cache, monkeypatch):
    monkeypatch.setenv("PMPP_COMPILE_MEMORY_MB", "512")
    code = '#define DEVICE "/dev/zero"\n#include DEVICE\n__global__ void slow(long* out) {}\n'
    message = assert_compile_stopped(code, f"g++ ran out of memory compiling {FILENAME} (limit 512 MiB",
                                     within_s=15, cache=cache)
    assert "PMPP_COMPILE_MEMORY_MB" in message


def test_a_huge_object_file_is_stopped_by_the_file_size_limit(cache, monkeypatch):
    monkeypatch.setenv("PMPP_COMPILE_FILE_MB", "1")
    code = "__device__ char table[1 << 23] = {1};\n__global__ void slow(long* out) { *out = table[0]; }\n"
    assert_compile_stopped(code, "g++ would write a file larger than 1 MiB", within_s=30, cache=cache)


def test_a_relative_cache_dir_is_resolved_once(tmp_path, monkeypatch):
    toolchain.runtime_library()
    monkeypatch.chdir(tmp_path)
    relative = f"cache-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PMPP_CACHE_DIR", relative)
    module = compile_submission(KERNEL, kernel_names=["add_one"])
    assert module.library_path.is_absolute()
    assert module.library_path.parent == tmp_path / relative / "cpu"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    assert toolchain.cache_dir() == tmp_path / relative / "cpu"
    x = np.arange(100, dtype=np.float32)
    module.launch("add_one", (1, 1, 1), (128, 1, 1), 0, [x, np.int32(100)], ["x", "n"], [True, False])
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32) + 1)
