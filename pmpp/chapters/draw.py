"""Where a chapter draws its inputs: large arrays on the device that will use them.

Every chapter's ``make_inputs(problem, xp, rng)`` gets a NumPy ``Generator``. On the CPU engine
(``xp`` is NumPy) everything is drawn from it, as always. On a GPU a 2^28-element input drawn on
the host and copied over takes seconds; :func:`generator_for` gives a CuPy generator seeded from
``rng`` instead, so the same seed still gives the same inputs on the same GPU software."""
from __future__ import annotations

import numpy as np


def on_host(xp) -> bool:
    return getattr(xp, "__name__", "numpy") == "numpy"


def generator_for(xp, rng: np.random.Generator):
    """``rng`` itself for NumPy; for CuPy a ``cupy.random.Generator`` seeded from ``rng``. Both
    have ``random(size, dtype)`` and ``integers(low, high, size, dtype)``."""
    if on_host(xp):
        return rng
    return xp.random.default_rng(int(rng.integers(2 ** 63)))


def array_module(array):
    """NumPy or CuPy, whichever holds ``array`` (NumPy for scalars and lists)."""
    import pmpp
    return pmpp.get_array_module(array)


def host(value) -> np.ndarray:
    """A NumPy array of ``value`` (a copy from the device if it lives there)."""
    import pmpp
    return np.asarray(pmpp.asnumpy(value))


def to_module(xp, array):
    """``array`` as an array of ``xp`` (NumPy: copied from the device if need be; CuPy: copied
    to it if need be)."""
    return host(array) if on_host(xp) else xp.asarray(array)
