"""The prelude is compiled once per set of build flags (pmpp/backends/cpu/pch.py), and a module
compiled against the precompiled form computes what one compiled against the text does."""
import numpy as np
import pytest

import pmpp.backends.cpu.build as build
from pmpp.backends.cpu import toolchain
import pmpp

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh module cache (the runtime library stays where it was built)."""
    toolchain.runtime_library()
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    return tmp_path / "cpu"


@pytest.fixture
def compiles(monkeypatch):
    """The command lines of the module compiles that run."""
    seen = []

    def recording(cmd, *args, **kwargs):
        seen.append(cmd)
        return run_limited(cmd, *args, **kwargs)

    run_limited = build.run_limited
    monkeypatch.setattr(build, "run_limited", recording)
    return seen


def saxpy(source, check=False, n=1000):
    module = pmpp.load(source=source, filename="saxpy.cu", backend="cpu", check=check)
    rng = np.random.default_rng(7)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = y.copy()
    module.get_function("saxpy")(((n + 127) // 128,), (128,), (np.float32(2.5), x, out, np.int32(n)))
    np.testing.assert_array_equal(out, np.float32(2.5) * x + y)


def precompiled(cache):
    return sorted(p for p in cache.glob("pch-*/pmpp_cuda.h.*") if p.suffix in (".gch", ".pch"))


def test_each_build_mode_compiles_the_prelude_once_and_its_modules_read_it(cache, compiles):
    saxpy(SAXPY)
    saxpy(SAXPY.replace("a * x[i]", "x[i] * a"))
    saxpy(SAXPY, check=True)
    headers = precompiled(cache)
    assert len(headers) == 3, headers   # plain, checked, and the device-code check's, each once
    modules = [cmd for cmd in compiles if "-c" in cmd]
    assert len(modules) == 3
    for cmd in modules:
        prelude = cmd[cmd.index("-include") + 1]
        assert prelude.startswith(str(cache / "pch-")), cmd


def test_a_precompiled_prelude_that_does_not_fit_is_not_used(cache):
    saxpy(SAXPY)
    for header in precompiled(cache):
        header.write_bytes(b"not a precompiled header")
    if toolchain.cxx().family != "gcc":
        pytest.skip("clang refuses a broken precompiled header instead of reading the text")
    saxpy(SAXPY.replace("a * x[i]", "x[i] * a"), n=777)


def test_user_macros_still_reach_the_kernel_after_the_precompiled_prelude(cache):
    source = SAXPY.replace("a * x[i]", "SCALE * a * x[i]")
    module = pmpp.load(source=source, filename="saxpy.cu", backend="cpu", defines={"SCALE": 2})
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    module.get_function("saxpy")((1,), (64,), (np.float32(1.5), x, y, np.int32(64)))
    np.testing.assert_array_equal(y, np.full(64, 3.0, np.float32))
