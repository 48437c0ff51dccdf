"""Whether CuPy's routines go through CUB, as CuPy itself is set up - never assumed.

CuPy tries CUB for ``sum``, ``max``, ``cumsum`` and the like when CUB is among its routine
accelerators: the ``CUPY_ACCELERATORS`` environment variable at import (``"cub"`` unless set
otherwise on CUDA), or ``cupy._core.set_routine_accelerators``. A chapter lists a routine twice,
labelled "(CUB)" and not, and :func:`available` lets exactly one of the two run.
"""
from __future__ import annotations

from typing import Callable


def uses_cub() -> bool:
    """Whether CUB is among CuPy's routine accelerators now."""
    from cupy._core import _accelerator
    return _accelerator.ACCELERATOR_CUB in _accelerator.get_routine_accelerators()


def available(*, with_cub: bool) -> Callable[[str], bool]:
    """``available(backend)`` for a CuPy routine's row: on CuPy, and labelled as CuPy is set up
    (``with_cub``: the row that says "(CUB)")."""
    return lambda backend: backend == "cupy" and uses_cub() == with_cub
