"""Benchmark of the CPU engine (not a test): ``python -m pmpp.backends.cpu.benchmark``.

A 2^20-element shared-memory tree reduction with 1024-thread blocks: each block sums 2048
inputs (two per thread, then ten halving steps, each behind a __syncthreads()) and writes its
partial. Prints the best-of-N launch time (compilation excluded) of the plain and the checked
build; the launch time includes moving the arrays to the worker process and back.

``--counters``: what counting costs (:mod:`pmpp.counters`), for every variant of every chapter at
the size the notebooks run it on the CPU engine: the best-of-N time of one run (all its launches)
from the count build against the plain build, and their ratio.
"""

import argparse
import time

import numpy as np

from . import CpuModule
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


def time_variant(chapter, variant, repeats):
    """Best-of-``repeats`` seconds of one run of ``variant`` (plain build, count build)."""
    from pmpp import runner
    from pmpp.counters import counting_module
    problem = runner.problem_for(variant, chapter.problems["cpu"])
    inputs = chapter.make_inputs(problem, np, np.random.default_rng(0))
    plain = runner.load_variant(chapter, variant, backend="cpu")
    counting = counting_module(plain)
    plain._impl.sm_count = counting._impl.sm_count    # the same launches on both
    best = []
    for module in (plain, counting):
        times = []
        for _ in range(repeats + 1):                  # the first run loads the module
            module.launches.clear()
            start = time.perf_counter()
            variant.launch(module, problem, inputs)
            times.append(time.perf_counter() - start)
        best.append(min(times[1:]))
    return best


def counters_cost(repeats):
    from pmpp import chapters
    print(f"{'chapter':<14} {'variant':<28} {'plain ms':>9} {'counted ms':>11} {'ratio':>6}")
    ratios = []
    for name in chapters.names():
        chapter = chapters.get(name)
        for variant in chapter.variants:
            if variant.gpu_only or variant.racy:
                continue
            plain, counted = time_variant(chapter, variant, repeats)
            ratios.append(counted / plain)
            print(f"{name:<14} {variant.name:<28} {plain * 1e3:>9.1f} {counted * 1e3:>11.1f} {ratios[-1]:>6.2f}",
                  flush=True)
    ratios.sort()
    print(f"{len(ratios)} variants, {default_threads()} worker threads: count build / plain build, median "
          f"{ratios[len(ratios) // 2]:.2f}x, worst {ratios[-1]:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--counters", action="store_true", help="what counting costs, per chapter variant")
    args = parser.parse_args()
    if args.counters:
        counters_cost(args.repeats)
        return
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
