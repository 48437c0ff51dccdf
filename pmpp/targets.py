"""The GPU generations the workbook is checked for, from the T4 to the H100, and whether a launch
fits one of them.

    spec = target("sm_75")                       # the T4's limits (a GPUSpec)
    launch_problems(spec, block=256, static_shared=0, dynamic_shared=100 * 1024)
    # ["100 KiB of shared memory per block (0 bytes static + 100 KiB dynamic); sm_75 (T4)
    #   allows at most 64 KiB: use a smaller tile"]

The limits are those of the table "Technical Specifications per Compute Capability" in NVIDIA's
CUDA C++ Programming Guide (appendix "Compute Capabilities",
https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html): per
block at most 1024 threads, 48 KiB of shared memory without opting in and 64 KiB (7.5), 163 KiB
(8.0), 99 KiB (8.6, 8.9) or 227 KiB (9.0) once the kernel opts in, 64 K registers, 255 per
thread. libcu++'s ``cuda::arch_traits`` (CCCL, ``cuda/__device/arch_traits.h``) gives the same
numbers. They are kept once, in :data:`pmpp.gpus.GPUS`, which the occupancy arithmetic uses
too; this module reads them from there.

The GPU backend opts in past 48 KiB itself (``max_dynamic_shared_size_bytes``, see
:mod:`pmpp.backends.gpu`), so a launch fits a target when its static + dynamic shared memory is
within the target's opt-in maximum. The CPU engine enforces a target's threads and shared memory
per block when ``$PMPP_TARGET`` names one (``PMPP_TARGET=sm_75``) or ``CpuModule(target=...)``
does; registers are the compiler's, so they are checked from nvcc's report
(:mod:`pmpp.compilecheck`), not by the engine.
"""
from __future__ import annotations

import os

from .args import dim3
from .gpus import GPUS, KB, RECORD_ARCHS, GPUSpec, gpu_spec, occupancy_from_resources

__all__ = ["ARCHS", "ENV_VAR", "LaunchLimitError", "check_launch", "engine_limits", "label",
           "launch_problems", "target", "target_from_env"]

ARCHS: tuple[str, ...] = RECORD_ARCHS  # oldest first
ENV_VAR = "PMPP_TARGET"


class LaunchLimitError(ValueError):
    """A launch that the chosen GPU would refuse: too many threads, shared memory or registers per block."""


def target(name: str | GPUSpec) -> GPUSpec:
    """The limits of a target: ``"sm_75"``, ``"75"``, ``"T4"``, ``"H100"`` (any name
    :func:`pmpp.gpus.gpu_spec` knows), or a GPUSpec."""
    if isinstance(name, str) and name.strip().isdigit():
        name = f"sm_{name.strip()}"
    try:
        return gpu_spec(name)
    except ValueError:
        raise ValueError(f"unknown target {name!r}: name one of {', '.join(ARCHS)} "
                         f"({', '.join(GPUS)})") from None


def target_from_env() -> GPUSpec | None:
    """The target ``$PMPP_TARGET`` names, or None where it is unset or empty."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return None
    try:
        return target(name)
    except ValueError as error:
        raise ValueError(f"${ENV_VAR}: {error}; or unset it for no target") from None


def label(spec: GPUSpec) -> str:
    """``"sm_75 (T4)"``: how messages name a target."""
    return f"{spec.arch} ({spec.name})"


def engine_limits(spec: GPUSpec) -> tuple[int, int, str]:
    """What the CPU engine enforces for ``spec``: (threads per block, static + dynamic shared
    bytes per block with opt-in, the target's name for its messages)."""
    return spec.max_threads_per_block, spec.max_shared_per_block_optin, label(spec)


def kib(size: int) -> str:
    """``65536`` -> ``"64 KiB"``; ``100`` -> ``"100 bytes"``; ``70000`` -> ``"68.4 KiB"``."""
    if size < KB:
        return f"{size} bytes"
    return f"{size // KB} KiB" if size % KB == 0 else f"{size / KB:.1f} KiB"


def launch_problems(spec: GPUSpec, block, static_shared: int = 0, dynamic_shared: int = 0,
                    registers: int | None = None) -> list[str]:
    """Why a block of ``block`` threads with this much static and dynamic shared memory (and,
    when given, ``registers`` per thread as ptxas reports them for ``spec.arch``) cannot launch
    on ``spec``: one sentence per limit it breaks, each saying what to do; empty if it fits."""
    dims = dim3(block, "block")
    threads = dims[0] * dims[1] * dims[2]
    who = label(spec)
    problems = []
    if threads > spec.max_threads_per_block:
        problems.append(f"a block of {threads} threads; {who} allows at most {spec.max_threads_per_block} "
                        "threads per block: use smaller blocks (and more of them)")
    shared = static_shared + dynamic_shared
    if shared > spec.max_shared_per_block_optin:
        problems.append(f"{kib(shared)} of shared memory per block ({kib(static_shared)} static + "
                        f"{kib(dynamic_shared)} dynamic); {who} allows at most "
                        f"{kib(spec.max_shared_per_block_optin)}: use a smaller tile")
    if registers and not problems:
        fit = occupancy_from_resources(registers, static_shared, block, dynamic_shared, spec)
        if fit.blocks_per_sm == 0:
            problems.append(f"on {who}, {fit.why}")
    return problems


def check_launch(spec: GPUSpec, block, static_shared: int = 0, dynamic_shared: int = 0,
                 registers: int | None = None, *, kernel: str = "the kernel") -> None:
    """Raise :class:`LaunchLimitError` naming every limit of ``spec`` the launch breaks."""
    problems = launch_problems(spec, block, static_shared, dynamic_shared, registers)
    if problems:
        raise LaunchLimitError(f"{kernel} cannot launch on {label(spec)}: " + "; ".join(problems))

