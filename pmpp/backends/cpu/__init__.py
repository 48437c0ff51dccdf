"""pmpp's CPU engine: runs CUDA kernels on machines without a GPU.

A CUDA source is compiled with the host g++ against a small prelude (include/pmpp_cuda.h) and
run with CUDA's execution model: blocks spread over the cores, each CUDA thread a fiber, real
barriers and warp primitives. ``check=True`` builds an instrumented module whose launches find
out-of-bounds accesses, shared-memory races and barrier divergence. See README.md.
"""

from .module import CpuModule

__all__ = ["CpuModule"]
