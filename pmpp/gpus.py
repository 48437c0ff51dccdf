"""The GPUs pmpp knows without having them: each one's SM limits (:data:`GPUS`, :func:`gpu_spec`)
and the occupancy arithmetic on a kernel's registers and shared memory
(:func:`occupancy_from_resources`; see :mod:`pmpp.occupancy` for the rules and for kernels).
A leaf: nothing here compiles, measures or reads a file."""
from __future__ import annotations

import html
import numbers
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .args import MAX_BLOCK, dim3

KB = 1024
MB = 1024 * KB
RECORD_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")   # the archs the resources are recorded for
LIMITS = ("warps", "registers", "shared memory", "blocks")   # the order cuda_occupancy.h names them in


# ---------------------------------------------------------------------------------------------
# The GPUs

@dataclass(frozen=True)
class GPUSpec:
    """One GPU's per-SM limits, as the CUDA Occupancy Calculator uses them. Sizes in bytes."""

    name: str                            # "H100"
    device_name: str                     # what the driver calls it (cudaDeviceProp.name)
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int                   # the largest shared-memory carveout
    shared_carveouts: tuple[int, ...]    # the shared/L1 splits the SM offers
    max_shared_per_block_optin: int      # static + dynamic, once the kernel opts in past 48 KB
    shared_allocation_unit: int
    reserved_shared_per_block: int       # kept by the driver for each block (sm_80 and newer)
    aliases: tuple[str, ...] = ()
    max_threads_per_block: int = 1024
    warp_size: int = 32
    registers_per_sm: int = 64 * KB      # 32-bit registers
    max_registers_per_block: int = 64 * KB
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256  # registers are given to a warp 256 at a time...
    register_allocation_granularity: str = "warp"   # ...per warp, not per block
    warp_allocation_granularity: int = 4  # register-file sub-partitions: warps counted in 4s
    max_shared_per_block: int = 48 * KB  # without opting in
    # What the time model (pmpp.predict) needs beyond the limits: data-sheet figures.
    clock_mhz: int = 0                   # boost clock of the SMs
    dram_gbs: float = 0.0                # DRAM bandwidth, GB/s (10^9 bytes)
    l2_bytes: int = 0
    fp32_per_sm: int = 128               # FP32 lanes per SM (64 on sm_75 and sm_80)

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def __str__(self) -> str:
        return f"{self.name} ({self.arch}, {self.sm_count} SMs)"


def _kb(*sizes: int) -> tuple[int, ...]:
    return tuple(s * KB for s in sizes)


# Sources, each number checked against them:
#  * CUDA C++ Programming Guide, "Compute Capabilities" (technical specifications per compute
#    capability: threads, warps and blocks per SM, registers, shared memory per SM and per block,
#    the carveout sizes), https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html
#  * the CUDA Occupancy Calculator as NVIDIA ships it, cuda_occupancy.h (CUDA 13.0): register
#    allocation unit 256 per warp, 4 sub-partitions, max blocks per SM (16 on sm_75 and sm_86,
#    24 on sm_89, 32 on sm_80 and sm_90), shared allocation unit (256 B on 7.x, 128 B on 8.x and
#    9.x), the carveout sizes it rounds to, and the per-block reserve added on sm_80 and newer;
#  * libcu++'s cuda::arch::traits (CCCL, cuda/__device/arch_traits.h): the same per-arch numbers,
#    the reserved shared memory (0 on sm_75, 1 KB on sm_80, sm_86, sm_89, sm_90) and the opt-in
#    maximum per block (the SM's capacity less that reserve);
#  * SM counts: NVIDIA's data sheets (T4 40, A100 108, RTX 3090 82, RTX 4090 128, L4 58, H100 SXM5
#    132, H200 132; the H100 80GB HBM3 and the H200 here reported 132 in results/);
#  * boost clocks, DRAM bandwidth and L2 sizes: NVIDIA's data sheets and architecture whitepapers
#    (T4 1590 MHz, 320 GB/s, 4 MB; A100 80GB SXM 1410 MHz, 2039 GB/s, 40 MB; RTX 3090 1695 MHz,
#    936 GB/s, 6 MB; RTX 4090 2520 MHz, 1008 GB/s, 72 MB; L4 2040 MHz, 300 GB/s, 48 MB), and for the
#    H100 and H200 what their drivers reported in results/ (1980 MHz; memory clock x bus width x 2:
#    3352 and 4814 GB/s; L2 50 and 60 MB); FP32 lanes per SM from the same whitepapers.
GPUS: dict[str, GPUSpec] = {spec.name: spec for spec in (
    GPUSpec("T4", "Tesla T4", (7, 5), sm_count=40, max_threads_per_sm=1024, max_blocks_per_sm=16,
            shared_per_sm=64 * KB, shared_carveouts=_kb(32, 64), max_shared_per_block_optin=64 * KB,
            shared_allocation_unit=256, reserved_shared_per_block=0, aliases=("sm_75",),
            clock_mhz=1590, dram_gbs=320, l2_bytes=4 * MB, fp32_per_sm=64),
    GPUSpec("A100", "NVIDIA A100-SXM4-80GB", (8, 0), sm_count=108, max_threads_per_sm=2048,
            max_blocks_per_sm=32, shared_per_sm=164 * KB,
            shared_carveouts=_kb(0, 8, 16, 32, 64, 100, 132, 164), max_shared_per_block_optin=163 * KB,
            shared_allocation_unit=128, reserved_shared_per_block=1 * KB,
            aliases=("sm_80", "A100 SXM", "A100 SXM4", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB",
                     "NVIDIA A100 80GB PCIe"),
            clock_mhz=1410, dram_gbs=2039, l2_bytes=40 * MB, fp32_per_sm=64),
    GPUSpec("RTX 3090", "NVIDIA GeForce RTX 3090", (8, 6), sm_count=82, max_threads_per_sm=1536,
            max_blocks_per_sm=16, shared_per_sm=100 * KB, shared_carveouts=_kb(0, 8, 16, 32, 64, 100),
            max_shared_per_block_optin=99 * KB, shared_allocation_unit=128,
            reserved_shared_per_block=1 * KB, aliases=("sm_86", "3090"),
            clock_mhz=1695, dram_gbs=936, l2_bytes=6 * MB),
    GPUSpec("RTX 4090", "NVIDIA GeForce RTX 4090", (8, 9), sm_count=128, max_threads_per_sm=1536,
            max_blocks_per_sm=24, shared_per_sm=100 * KB, shared_carveouts=_kb(0, 8, 16, 32, 64, 100),
            max_shared_per_block_optin=99 * KB, shared_allocation_unit=128,
            reserved_shared_per_block=1 * KB, aliases=("sm_89", "4090"),
            clock_mhz=2520, dram_gbs=1008, l2_bytes=72 * MB),
    GPUSpec("L4", "NVIDIA L4", (8, 9), sm_count=58, max_threads_per_sm=1536,
            max_blocks_per_sm=24, shared_per_sm=100 * KB, shared_carveouts=_kb(0, 8, 16, 32, 64, 100),
            max_shared_per_block_optin=99 * KB, shared_allocation_unit=128,
            reserved_shared_per_block=1 * KB, clock_mhz=2040, dram_gbs=300, l2_bytes=48 * MB),
    GPUSpec("H100", "NVIDIA H100 80GB HBM3", (9, 0), sm_count=132, max_threads_per_sm=2048,
            max_blocks_per_sm=32, shared_per_sm=228 * KB,
            shared_carveouts=_kb(0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
            max_shared_per_block_optin=227 * KB, shared_allocation_unit=128,
            reserved_shared_per_block=1 * KB, aliases=("sm_90", "H100 SXM", "H100 SXM5"),
            clock_mhz=1980, dram_gbs=3352, l2_bytes=50 * MB),
    GPUSpec("H200", "NVIDIA H200", (9, 0), sm_count=132, max_threads_per_sm=2048,
            max_blocks_per_sm=32, shared_per_sm=228 * KB,
            shared_carveouts=_kb(0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
            max_shared_per_block_optin=227 * KB, shared_allocation_unit=128,
            reserved_shared_per_block=1 * KB, aliases=("H200 SXM",),
            clock_mhz=1980, dram_gbs=4814, l2_bytes=60 * MB),
)}


def _alias_key(name: str) -> str:
    """``"NVIDIA GeForce RTX 3090"``, ``"rtx-3090"`` -> ``"rtx3090"``; ``"sm_90"`` -> ``"sm90"``."""
    words = re.sub(r"\b(nvidia|geforce|tesla)\b", " ", name.lower())
    return re.sub(r"[^a-z0-9]", "", words)


_ALIASES = {_alias_key(alias): spec for spec in GPUS.values()
            for alias in (spec.name, spec.device_name, *spec.aliases)}


def gpu_spec(gpu: str | GPUSpec) -> GPUSpec:
    """The :class:`GPUSpec` named ``gpu``: ``"H100"``, ``"h100 sxm"``, ``"sm_90"``, or the driver's
    device name (``"NVIDIA H100 80GB HBM3"``), case and spacing ignored."""
    if isinstance(gpu, GPUSpec):
        return gpu
    if not isinstance(gpu, str):
        raise TypeError(f"gpu must be a GPU's name such as 'H100', got {gpu!r}")
    spec = _ALIASES.get(_alias_key(gpu))
    if spec is None:
        known = ", ".join(f"{s.name} ({s.arch})" for s in GPUS.values())
        raise ValueError(f"unknown GPU {gpu!r}: the known GPUs are {known}; pass one of these names "
                         "or its sm_XY")
    return spec


def gpu_spec_for_device_name(name: str) -> GPUSpec | None:
    """The table's entry for a device as the driver names it (``cupy.cuda.runtime.
    getDeviceProperties(0)["name"]``, e.g. ``"NVIDIA H100 80GB HBM3"``); None if it has none."""
    if isinstance(name, bytes):
        name = name.decode()
    try:
        return gpu_spec(name)
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# The arithmetic

@dataclass(frozen=True)
class KernelResources:
    """A kernel's registers per thread and static ``__shared__`` bytes per block, as ptxas reports
    them (dynamic shared memory is not the kernel's: it is the launch's ``shared_mem``)."""

    registers: int
    static_shared_bytes: int = 0
    name: str | None = None
    origin: str = "given"               # where the numbers come from


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel one SM holds, and why no more. ``occupancy`` is active warps /
    the SM's maximum; ``limiter`` names the resource(s) that set ``blocks_per_sm`` (several when
    they tie); ``block_limits`` is the number of blocks each resource alone allows (None: no limit)."""

    gpu: str
    arch: str
    kernel: str | None
    block_size: int                     # threads per block
    registers_per_thread: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float
    limiter: tuple[str, ...]
    block_limits: Mapping[str, int | None] = field(hash=False)
    warps_per_block: int
    registers_per_block: int            # as allocated: whole warps, 256 registers at a time
    shared_bytes_per_block: int         # as allocated: static + dynamic + reserved, rounded up
    shared_bytes_per_sm: int            # the carveout assumed
    resources_from: str
    why: str = ""                       # why no block fits, when blocks_per_sm is 0
    spec: GPUSpec = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        who = f"{self.kernel or 'kernel'} on {self.gpu} ({self.arch}), {self.block_size} threads/block"
        if self.blocks_per_sm == 0:
            head = f"{who}: 0 blocks/SM, the block cannot run: {self.why}"
        else:
            blocks = f"{self.blocks_per_sm} block{'s' if self.blocks_per_sm > 1 else ''}/SM"
            head = (f"{who}: {blocks} = {self.active_warps_per_sm}/"
                    f"{self.max_warps_per_sm} warps, occupancy {_percent(self.occupancy)}, limited by "
                    f"{_limiter_text(self.limiter)}")
        limits = ", ".join(f"{k} {'-' if v is None else v}" for k, v in self.block_limits.items())
        return (f"{head}\n  per block: {self.registers_per_thread} registers/thread, "
                f"{self._shared_text()}; blocks/SM allowed by {limits} [{self.resources_from}]")

    def _shared_text(self) -> str:
        reserved = self.spec.reserved_shared_per_block if self.spec else 0
        return (f"{self.shared_bytes_per_block:,} B shared ({self.static_shared_bytes:,} static + "
                f"{self.dynamic_shared_bytes:,} dynamic + {reserved:,} reserved, rounded up)")

    def _repr_html_(self) -> str:
        spec = self.spec or gpu_spec(self.gpu)
        rows = [("warps", f"{self.warps_per_block} ({self.block_size} threads)",
                 f"{spec.max_warps_per_sm} warps"),
                ("registers", f"{self.registers_per_block:,} ({self.registers_per_thread}/thread)",
                 f"{spec.registers_per_sm:,}"),
                ("shared memory", self._shared_text(), f"{self.shared_bytes_per_sm:,} B"),
                ("blocks", "1", f"{spec.max_blocks_per_sm} blocks")]
        bold = ' style="font-weight:bold"'
        body = "".join(
            f"<tr{bold if name in self.limiter else ''}><td>{name}</td>"
            f"<td>{html.escape(need)}</td><td>{html.escape(per_sm)}</td>"
            f"<td>{'-' if self.block_limits[name] is None else self.block_limits[name]}</td></tr>"
            for name, need, per_sm in rows)
        summary = html.escape(str(self).splitlines()[0])
        return (f"<table><caption>{summary}</caption><tr><th>resource</th><th>per block</th>"
                f"<th>per SM</th><th>blocks/SM</th></tr>{body}</table>"
                f"<small>registers and shared memory: {html.escape(self.resources_from)}</small>")


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def _limiter_text(limiter: Sequence[str]) -> str:
    names = [{"warps": "warps (threads per SM)", "blocks": "blocks (blocks per SM)"}.get(n, n) for n in limiter]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy_from_resources(registers: int, static_shared: int, block, shared_mem: int = 0,
                             gpu: str | GPUSpec = "H100", *, carveout: int | None = None,
                             kernel: str | None = None, resources_from: str = "given") -> Occupancy:
    """The occupancy of a kernel that uses ``registers`` per thread and ``static_shared`` bytes of
    ``__shared__`` arrays, launched with ``block`` (an int or a 1-3 tuple) and ``shared_mem`` bytes
    of dynamic shared memory on ``gpu``. Pure arithmetic: see the module's docstring."""
    spec = gpu_spec(gpu)
    threads = _block_threads(block, spec)
    registers, static_shared, shared_mem = (_whole(what, value) for what, value in (
        ("registers", registers), ("static_shared", static_shared), ("shared_mem", shared_mem)))
    _check_resources(registers, static_shared, shared_mem, spec)
    warps = -(-threads // spec.warp_size)
    shared = _round_up(static_shared + shared_mem + spec.reserved_shared_per_block, spec.shared_allocation_unit)
    per_sm = _carveout_bytes(spec, shared, carveout)
    limits = {"warps": spec.max_warps_per_sm // warps,
              "registers": _blocks_by_registers(registers, warps, spec),
              "shared memory": per_sm // shared if shared else None,
              "blocks": spec.max_blocks_per_sm}
    blocks = min(v for v in limits.values() if v is not None)
    reg_warp = _round_up(registers * spec.warp_size, spec.register_allocation_unit)
    return Occupancy(
        gpu=spec.name, arch=spec.arch, kernel=kernel, block_size=threads, registers_per_thread=registers,
        static_shared_bytes=static_shared, dynamic_shared_bytes=shared_mem, blocks_per_sm=blocks,
        active_warps_per_sm=blocks * warps, max_warps_per_sm=spec.max_warps_per_sm,
        occupancy=blocks * warps / spec.max_warps_per_sm,
        limiter=tuple(name for name in LIMITS if limits[name] == blocks), block_limits=limits,
        warps_per_block=warps, registers_per_block=reg_warp * warps, shared_bytes_per_block=shared,
        shared_bytes_per_sm=per_sm, resources_from=resources_from,
        why=_why_no_block(threads, warps, registers, reg_warp, spec) if blocks == 0 else "", spec=spec)


def _block_threads(block, spec: GPUSpec) -> int:
    dims = dim3(block, "block")
    threads = dims[0] * dims[1] * dims[2]
    if threads > spec.max_threads_per_block:
        raise ValueError(f"block{dims} has {threads} threads; the {spec.name} allows at most "
                         f"{spec.max_threads_per_block} per block: use smaller blocks (and more of them)")
    for axis, (d, limit) in enumerate(zip(dims, MAX_BLOCK)):
        if d > limit:
            raise ValueError(f"block{dims}: dimension {'xyz'[axis]} = {d} exceeds CUDA's limit {limit}")
    return threads


def _whole(what: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} must be a whole number >= 0, got {value!r}")
    return int(value)


def _check_resources(registers: int, static_shared: int, shared_mem: int, spec: GPUSpec) -> None:
    if registers > spec.max_registers_per_thread:
        raise ValueError(f"{registers} registers per thread: a thread on the {spec.name} has at most "
                         f"{spec.max_registers_per_thread} (past that ptxas spills to local memory); "
                         f"ask about at most {spec.max_registers_per_thread}")
    total = static_shared + shared_mem
    if total > spec.max_shared_per_block_optin:
        raise ValueError(
            f"{total:,} bytes of shared memory per block ({static_shared:,} static + {shared_mem:,} "
            f"dynamic) is more than the {spec.name}'s {spec.max_shared_per_block_optin:,} "
            f"({spec.max_shared_per_block_optin // KB} KB) per block: ask for at most "
            f"{max(spec.max_shared_per_block_optin - static_shared, 0):,} bytes of dynamic shared "
            "memory, or use smaller tiles")


def _blocks_by_registers(registers: int, warps: int, spec: GPUSpec) -> int | None:
    """Blocks per SM the register file allows (None: the kernel uses no registers)."""
    if registers == 0:
        return None
    per_warp = _round_up(registers * spec.warp_size, spec.register_allocation_unit)
    quarters = spec.warp_allocation_granularity
    if per_warp * _round_up(warps, quarters) > spec.max_registers_per_block:
        return 0                       # the launch check counts the block's warps in whole 4s
    warps_per_quarter = (spec.registers_per_sm // quarters) // per_warp
    return warps_per_quarter * quarters // warps


def _carveout_bytes(spec: GPUSpec, block_bytes: int, carveout: int | None) -> int:
    """Shared memory per SM: the whole capacity with no preference, else ``carveout`` percent of it
    rounded up to a size the SM offers; never less than the size that holds one block."""
    if carveout is None:
        wanted = spec.shared_per_sm
    elif isinstance(carveout, int) and not isinstance(carveout, bool) and 0 <= carveout <= 100:
        wanted = carveout * spec.shared_per_sm // 100
    else:
        raise ValueError(f"carveout is a percentage of the SM's shared memory, 0 to 100 (or None for "
                         f"no preference), got {carveout!r}")
    return next(size for size in spec.shared_carveouts if size >= max(wanted, block_bytes))


def _why_no_block(threads: int, warps: int, registers: int, per_warp: int, spec: GPUSpec) -> str:
    counted = _round_up(warps, spec.warp_allocation_granularity)
    return (f"{threads} threads x {registers} registers need {per_warp * counted:,} registers "
            f"({per_warp:,} per warp x {counted} warps), more than the {spec.max_registers_per_block:,} a "
            f"block may have: use fewer threads per block, or cap the registers with "
            f"__launch_bounds__({threads}) or -maxrregcount")
