"""Library routines that the chapters measure their kernels against, where calling them takes
more than one line: CUB's device-wide routines (:mod:`pmpp.libraries.cub`) and what CuPy's own
routines go through (:mod:`pmpp.libraries.cupy_routines`)."""
