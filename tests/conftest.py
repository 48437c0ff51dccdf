import pytest

import pmpp


def pytest_collection_modifyitems(config, items):
    if pmpp.gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with CuPy (pmpp.gpu_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
