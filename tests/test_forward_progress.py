"""The CPU engine keeps CUDA's forward progress and its prelude keeps out of the user's macros.

* A loop that spins on memory nobody changes hangs, as on a GPU, and reaches the launch's time
  limit (the C++ compiler may not delete it as a loop without side effects).
* A thread that polls a flag with an atomic, or (checked builds) a volatile load, lets the other
  threads of its block run: a flag set by another warp of the same block ends the wait.
* Macros given as ``defines=`` (or ``#define``d before an engine header) never reach the engine's
  own code: short names such as a stencil radius ``R`` compile.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import pmpp
from pmpp.backends.cpu import toolchain
from pmpp.errors import KernelTimeoutError


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch):
    """These kernels test the engine's own scheduling and prelude: some wait with GCC's __atomic
    builtins, and some define macros (T, N) that break NVRTC's own header, which NVRTC's check
    rightly refuses (tests/test_nvrtc_check.py)."""
    monkeypatch.setenv("PMPP_NVRTC", "0")

SPIN_ON_UNCHANGED_MEMORY = r"""
extern "C" __global__ void wait_for_nothing(const int* p, int* out) {
    while (p[0] == 0) { }
    out[threadIdx.x] = 1;
}
"""

# Thread 0 waits for a flag that thread 64 (another warp of the same block) sets; every thread
# then writes its index. `flag` starts at 0.
FLAG_BETWEEN_WARPS = r"""
extern "C" __global__ void atomic_flag(int* flag, int* out) {
    if (threadIdx.x == 0) {
        while (atomicAdd(flag, 0) == 0) { }
    }
    if (threadIdx.x == 64) atomicExch(flag, 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x;
}

// A spin lock that lane 0 of each warp takes in turn. The holder waits in __syncwarp() for its
// warp while it holds the lock, so lane 0 of the next warp finds it taken and spins on atomicCAS.
extern "C" __global__ void cas_lock(int* lock, int* counter) {
    bool leader = threadIdx.x % 32 == 0;
    if (leader) {
        while (atomicCAS(lock, 0, 1) != 0) { }
    }
    __syncwarp();
    if (leader) {
        *(volatile int*)counter = *(volatile int*)counter + 1;
        atomicExch(lock, 0);
    }
}

extern "C" __global__ void ldcg_flag(int* flag, int* out) {
    if (threadIdx.x == 0) {
        while (__ldcg(flag) == 0) { }
    }
    if (threadIdx.x == 64) atomicExch(flag, 1);
    out[threadIdx.x] = threadIdx.x;
}

extern "C" __global__ void builtin_atomic_flag(int* flag, int* out) {
    if (threadIdx.x == 0) {
        while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) { }
    }
    if (threadIdx.x == 64) atomicExch(flag, 1);
    out[threadIdx.x] = threadIdx.x;
}

extern "C" __global__ void volatile_flag(int* flag, int* out) {
    volatile int* f = flag;
    if (threadIdx.x == 0) {
        while (f[0] == 0) { }
    }
    if (threadIdx.x == 64) atomicExch(flag, 1);
    out[threadIdx.x] = threadIdx.x;
}
"""

TIMEOUT_S = 2


def load(source, name, **kwargs):
    return pmpp.load(source=source, filename=name, backend="cpu", **kwargs)


# ---- a loop that spins forever stays a loop -----------------------------------------------------

def test_spin_on_memory_nobody_changes_hangs_until_the_time_limit():
    mod = load(SPIN_ON_UNCHANGED_MEMORY, "spin.cu", timeout=TIMEOUT_S)
    out = np.zeros(32, np.int32)
    with pytest.raises(KernelTimeoutError, match=rf"kernel 'wait_for_nothing' .*did not finish within {TIMEOUT_S} s"):
        mod.get_function("wait_for_nothing")((1,), (32,), (np.zeros(1, np.int32), out))
    mod.get_function("wait_for_nothing")((1,), (32,), (np.ones(1, np.int32), out))
    np.testing.assert_array_equal(out, 1)


# ---- polling threads let the rest of their block run ----------------------------------------------

@pytest.mark.parametrize("build", [{}, {"check": True}, {"count": True}], ids=["plain", "checked", "count"])
def test_atomic_flag_set_by_another_warp_of_the_block_ends_the_wait(build):
    mod = load(FLAG_BETWEEN_WARPS, "flags.cu", timeout=30, **build)
    flag, out = np.zeros(1, np.int32), np.full(256, -1, np.int32)
    mod.get_function("atomic_flag")((2,), (128,), (flag, out))
    assert flag[0] == 1
    np.testing.assert_array_equal(out, np.tile(np.arange(128), 2))


def test_spin_lock_between_warps_of_a_block_lets_every_warp_in():
    mod = load(FLAG_BETWEEN_WARPS, "flags.cu", timeout=30)
    lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32)
    mod.get_function("cas_lock")((1,), (256,), (lock, counter))
    assert (lock[0], counter[0]) == (0, 256 // 32)


def test_coherent_load_flag_set_by_another_warp_ends_the_wait():
    mod = load(FLAG_BETWEEN_WARPS, "flags.cu", timeout=30)
    flag, out = np.zeros(1, np.int32), np.full(128, -1, np.int32)
    mod.get_function("ldcg_flag")((1,), (128,), (flag, out))
    np.testing.assert_array_equal(out, np.arange(128))


@pytest.mark.parametrize("kernel", ["volatile_flag", "builtin_atomic_flag"])
def test_volatile_or_builtin_atomic_flag_ends_the_wait_in_checked_builds(kernel):
    mod = load(FLAG_BETWEEN_WARPS, "flags.cu", check=True, timeout=30)
    flag, out = np.zeros(1, np.int32), np.full(128, -1, np.int32)
    mod.get_function(kernel)((1,), (128,), (flag, out))
    np.testing.assert_array_equal(out, np.arange(128))


def test_atomic_poll_nobody_answers_still_reaches_the_time_limit():
    mod = load(FLAG_BETWEEN_WARPS, "flags.cu", timeout=TIMEOUT_S)
    with pytest.raises(KernelTimeoutError, match=r"kernel 'atomic_flag' .*did not finish"):
        # 64 threads: nobody is thread 64, so the flag stays 0
        mod.get_function("atomic_flag")((1,), (64,), (np.zeros(1, np.int32), np.zeros(64, np.int32)))


# ---- user macros stay out of the engine's headers -------------------------------------------------

INCLUDE_DIR = Path(toolchain.__file__).parent / "include"
# Headers a kernel includes after its own #defines (the prelude itself comes before them).
ENGINE_HEADERS = ["cuda_runtime.h", "cuda_fp16.h", "cuda_pipeline.h", "cuda/barrier", "math_constants.h",
                  "assert.h"]
ISSUE_NAMES = {"R": 2, "N": 3, "T": 4, "X": 5, "BLOCK": 6}
_TEMPLATE_HEAD = re.compile(r"template\s*<([^<>]*(?:<[^<>]*>[^<>]*)*)>")
_TYPEDEF_NAME = re.compile(r"\btypedef\b[^;{}]*?\b([A-Za-z]\w*)\s*;")


def names_the_headers_declare():
    """Template parameters and typedef names of every engine header that are not reserved (a
    leading underscore and capital, or two underscores) and not the engine's own (pmpp...)."""
    names = set()
    for header in INCLUDE_DIR.rglob("*"):
        if not header.is_file():
            continue
        text = header.read_text()
        for head in _TEMPLATE_HEAD.findall(text):
            for param in head.split(","):
                m = re.search(r"([A-Za-z_]\w*)\s*(?:=.*)?$", param.strip().replace("...", " "))
                if m:
                    names.add(m.group(1))
        names.update(_TYPEDEF_NAME.findall(text))
    keywords = {"class", "typename", "int", "auto", "size_t"}
    return {n for n in names if n not in keywords and not re.match(r"_[A-Z_]|pmpp|PMPP", n)
            and re.match(r"[A-Z]", n)}   # lower-case names are CUDA's own (half, cudaError_t, ...)


HYGIENE_KERNEL = "".join(f"#include <{h}>\n" for h in ENGINE_HEADERS) + r"""
extern "C" __global__ void stencil(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0.0f;
    for (int k = -R; k <= R; ++k) {
        int j = min(max(i + k, 0), n - 1);
        sum += in[j];
    }
    out[i] = sum + N * T + X + BLOCK;
}
"""


def stencil_reference(x, radius):
    n = len(x)
    idx = np.clip(np.arange(n)[:, None] + np.arange(-radius, radius + 1)[None, :], 0, n - 1)
    return x[idx].sum(axis=1, dtype=np.float64)


@pytest.mark.parametrize("check", [False, True], ids=["plain", "checked"])
def test_short_macro_names_in_defines_compile_and_run(check):
    defines = dict(ISSUE_NAMES)
    defines.update({name: 7 for name in names_the_headers_declare() - set(defines)})
    mod = load(HYGIENE_KERNEL, "hygiene.cu", defines=defines, check=check)
    x = np.random.default_rng(0).random(100).astype(np.float32)
    out = np.full(100, np.nan, np.float32)
    mod.get_function("stencil")((2,), (64,), (x, out, np.int32(100)))
    extra = 3 * 4 + 5 + 6
    np.testing.assert_allclose(out, stencil_reference(x, 2) + extra, rtol=1e-5)


def test_defines_before_an_engine_header_in_the_source_compile():
    source = "#define N 3\n#define T float\n#define Scope 1\n" + HYGIENE_KERNEL.replace("N * T", "N * 4")
    mod = load(source, "hygiene_in_source.cu", defines={"R": 1, "X": 5, "BLOCK": 6})
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    mod.get_function("stencil")((1,), (32,), (x, out, np.int32(10)))
    np.testing.assert_allclose(out, stencil_reference(x, 1) + 3 * 4 + 5 + 6)


@pytest.mark.parametrize("include", ["#include <assert.h>", ""])
def test_ndebug_in_defines_turns_device_assert_off(include):
    source = include + r"""
    extern "C" __global__ void check(int* out) { assert(threadIdx.x > 100); out[threadIdx.x] = 1; }
    """
    mod = load(source, "ndebug.cu", defines={"NDEBUG": True})
    out = np.zeros(32, np.int32)
    mod.get_function("check")((1,), (32,), (out,))
    np.testing.assert_array_equal(out, 1)
