"""Benchmark of the CPU engine (not a test): ``python -m pmpp.backends.cpu.benchmark``.

A 2^20-element shared-memory tree reduction with 1024-thread blocks: each block sums 2048
inputs (two per thread, then ten halving steps, each behind a __syncthreads()) and writes its
partial. Prints the best-of-N launch time (compilation excluded) of the plain and the checked
build; the launch time includes moving the arrays to the worker process and back.

What counting costs is measured by ``python -m pmpp.profiling.count_cost``.
"""

import argparse
import time

import numpy as np

from .module import CpuModule
from .client import default_threads

SOURCE = '''#line 1 "benchmark/tree_reduction.cu"
extern "C" __global__ void TreeSum(const float* input, float* output) {
    __shared__ float partial[1024];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x * 2 + t;
    partial[t] = input[i] + input[i + blockDim.x];
    for (unsigned stride = blockDim.x / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (t < stride) partial[t] += partial[t + stride];
    }
    if (t == 0) output[blockIdx.x] = partial[0];
}
'''


def time_launches(check, n, repeats):
    mod = CpuModule(SOURCE, filename="benchmark/tree_reduction.cu", kernel_names=["TreeSum"], check=check)
    x = np.random.default_rng().random(n, dtype=np.float32)
    out = np.full(n // 2048, np.nan, np.float32)
    times = []
    for _ in range(repeats + 1):  # the first launch also loads the module and maps fiber stacks
        start = time.perf_counter()
        mod.launch("TreeSum", (n // 2048, 1, 1), (1024, 1, 1), 0, [x, out], ["input", "output"], [False, True])
        times.append(time.perf_counter() - start)
    np.testing.assert_allclose(out, x.reshape(-1, 2048).sum(1, dtype=np.float64), rtol=1e-4)
    return min(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = 1 << args.log2n
    plain = time_launches(False, n, args.repeats)
    checked = time_launches(True, n, args.repeats)
    barriers = (n // 2048) * 1024 * 11  # thread-barrier passages: 10 in the loop, 1 at exit
    print(f"tree reduction of 2^{args.log2n} floats, 1024-thread blocks, {default_threads()} worker threads")
    print(f"  plain:   {plain * 1e3:7.1f} ms per launch ({plain / barriers * 1e9 * default_threads():.0f} "
          "ns per thread per barrier per core)")
    print(f"  checked: {checked * 1e3:7.1f} ms per launch ({checked / plain:.1f}x plain)")


if __name__ == "__main__":
    main()
