"""Launches of kernels the workbook does not contain (``predict_cases.cu``), for checking the time
model on code it was not fitted to.

    python -m pmpp.profiling.predict_cases        # on a GPU: time each, write results/predict/

Each case is one launch at a size the CPU engine counts in seconds and far above the L2 of the
GPUs recorded (arrays of 32 to 64 MB), except where the kernel's point is a contended atomic.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..results import RESULTS_DIR

KERNEL_FILE = Path(__file__).with_name("predict_cases.cu")
RECORDINGS = RESULTS_DIR / "predict"
SEED = 20261129
N = 2 ** 24            # elements of the 1-D cases: 64 MB of float32 per array
SIDE = 4096            # the matrices: 4096 x 4096 float32, 64 MB


@dataclass(frozen=True)
class Case:
    name: str
    kernel: str
    grid: tuple
    block: tuple
    arguments: Callable[[Any, np.random.Generator], Sequence[Any]]   # (xp, rng) -> the launch's arguments
    what: str


def _floats(xp, rng, n):
    return xp.asarray(rng.random(n, dtype=np.float32))


def _blocks(n: int, per: int) -> int:
    return math.ceil(n / per)


CASES = (
    Case("empty", "empty", (1,), (32,), lambda xp, rng: (), "a launch that does nothing: its fixed cost"),
    Case("saxpy", "saxpy", (_blocks(N, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, N), _floats(xp, rng, N), np.float32(2.0), np.uint32(N)),
         "y = a x + y, coalesced"),
    Case("strided_copy", "strided_copy", (_blocks(N // 2, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, N), xp.zeros(N // 2, np.float32), np.uint32(N // 2)),
         "every second float: half of each sector wasted"),
    Case("gather", "gather", (_blocks(N // 2, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, N), xp.asarray(rng.integers(0, N, N // 2, dtype=np.uint32)),
                          xp.zeros(N // 2, np.float32), np.uint32(N // 2)),
         "random reads, a sector per lane"),
    Case("transpose_naive", "transpose_naive", (SIDE // 32, SIDE // 8), (32, 8),
         lambda xp, rng: (_floats(xp, rng, SIDE * SIDE), xp.zeros(SIDE * SIDE, np.float32), np.uint32(SIDE)),
         "uncoalesced stores"),
    Case("transpose_tiled_conflicts", "transpose_tiled_conflicts", (SIDE // 32, SIDE // 32), (32, 8),
         lambda xp, rng: (_floats(xp, rng, SIDE * SIDE), xp.zeros(SIDE * SIDE, np.float32), np.uint32(SIDE)),
         "shared-memory tile, 32-way bank conflicts"),
    Case("transpose_tiled", "transpose_tiled", (SIDE // 32, SIDE // 32), (32, 8),
         lambda xp, rng: (_floats(xp, rng, SIDE * SIDE), xp.zeros(SIDE * SIDE, np.float32), np.uint32(SIDE)),
         "shared-memory tile, padded"),
    Case("matvec_row_per_thread", "matvec_row_per_thread", (_blocks(SIDE, 128),), (128,),
         lambda xp, rng: (_floats(xp, rng, SIDE * SIDE), _floats(xp, rng, SIDE), xp.zeros(SIDE, np.float32),
                          np.uint32(SIDE)),
         "a thread per row: uncoalesced, 128 warps"),
    Case("matvec_warp_per_row", "matvec_warp_per_row", (_blocks(SIDE * 32, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, SIDE * SIDE), _floats(xp, rng, SIDE), xp.zeros(SIDE, np.float32),
                          np.uint32(SIDE)),
         "a warp per row, shuffles"),
    Case("dot_atomic_each", "dot_atomic_each", (_blocks(N // 4, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, N // 4), _floats(xp, rng, N // 4), xp.zeros(1, np.float32),
                          np.uint32(N // 4)),
         "every thread's atomicAdd on one address"),
    Case("dot_block_reduce", "dot_block_reduce", (_blocks(N, 256),), (256,),
         lambda xp, rng: (_floats(xp, rng, N), _floats(xp, rng, N), xp.zeros(1, np.float32), np.uint32(N)),
         "a shared-memory tree per block, an atomic per block"),
)


def load(backend: str):
    from ..loader import load as load_module
    return load_module(KERNEL_FILE, backend=backend)


def time_cases(report=print) -> list[dict]:
    """Each case timed on this GPU as the workbook times (CUDA events, warm-up, median of 30)."""
    import cupy
    from ..timing import bench
    module = load("cupy")
    rows = []
    for case in CASES:
        args = case.arguments(cupy, np.random.default_rng(SEED))
        kernel = module.get_function(case.kernel)
        timing = bench(lambda: kernel(case.grid, case.block, args), backend="cupy", warmup=5, repeat=30)
        rows.append({"name": case.name, "median_us": timing.median_us, "q1_us": timing.q1_us,
                     "q3_us": timing.q3_us, "noisy": bool(timing.noisy)})
        report(f"{case.name:28} {timing.median_us:10.1f} us  (q1 {timing.q1_us:.1f}, q3 {timing.q3_us:.1f})")
    return rows


def recorded(directory: str | Path | None = None) -> list[dict]:
    """The recordings in ``results/predict/``, newest first."""
    folder = Path(directory) if directory is not None else RECORDINGS
    found = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return sorted(found, key=lambda r: r["date"], reverse=True)


def main(argv=None) -> None:
    from .. import results
    parser = argparse.ArgumentParser(description="time the time model's check kernels on this GPU")
    parser.add_argument("--out", help="file to write (default: results/predict/<device>-<commit>.json)")
    args = parser.parse_args(argv)
    device, commit = results.device_info("cupy"), results.git_commit()
    rows = time_cases()
    out = Path(args.out) if args.out else RECORDINGS / f"{results.device_slug(device['name'])}-{commit}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    import datetime
    out.write_text(json.dumps({"device": device, "versions": results.versions("cupy"), "commit": commit,
                               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               "clock": "cuda events", "cases": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
