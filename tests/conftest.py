import os

import numpy as np
import pytest

import pmpp

# NVRTC's front-end check of kernel code (pmpp/backends/cpu/nvrtc.py) runs in its own tests, over
# every workbook kernel (tests/test_nvrtc_check.py, which turns it on); elsewhere it is off unless
# asked for, to keep the suite's time down: it adds a compile to each of the suite's ~900 builds.
os.environ.setdefault("PMPP_NVRTC", "0")


def pytest_collection_modifyitems(config, items):
    if pmpp.gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with CuPy (pmpp.gpu_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cupy", marks=pytest.mark.gpu)])
def backend(request):
    """Each chapter test runs on the CPU engine, and on the GPU where there is one."""
    if request.param != "cpu" and not pmpp.gpu_available():
        pytest.skip("no GPU found: GPU tests run only where CuPy sees a CUDA device")
    return request.param


@pytest.fixture
def seed():
    """A fresh seed per test (printed by pytest on failure, so a failure can be replayed)."""
    return int(np.random.SeedSequence().entropy % 2 ** 32)


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)
