import numpy as np
import pytest

import pmpp


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
