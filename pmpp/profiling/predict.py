"""How fast would it run? A launch's time on a GPU, predicted from the CPU engine's counts.

    k = pmpp.load("reduction/05_coarsened.cu", backend="cpu").get_function("CoarsenedSumReductionKernel")
    p = pmpp.predict(k, grid, block, (x, out, np.uint32(n)), gpu="H100")
    p.time_us, p.bound          # microseconds, and the resource that bounds it ("DRAM", "issue", ...)
    print(p)                    # each resource's time, the largest first

The launch runs once on the CPU engine, counted (:mod:`pmpp.counters`). Each count becomes the time
one resource of the GPU needs for it, from the GPU's data sheet (:data:`pmpp.gpus.GPUS`): DRAM
bytes over DRAM bandwidth, global sectors over the L1's 4 sectors per clock, shared-memory
wavefronts over one per clock, warp instructions over 4 issued per clock, updates of one address
by atomics one after another, a block's steps between barriers each waiting for its loads; the
SMs are those the grid fills. DRAM's bytes take at least as long as the warps the kernel keeps
resident (occupancy), each with a load on its way, need to bring them in. The launch takes as long
as its slowest resource, plus a share of the others' time, plus a launch's fixed cost. What no
data sheet gives is in :data:`CONSTANTS`: the fixed cost measured (an empty launch on the H200),
the others fitted once on the H100's recordings and held unchanged on the H200's (the CPU engine's
README says how, and what the model cannot see).

:func:`predict_variant` predicts a workbook variant at its chapter's GPU size: it counts the
variant at two sizes small enough for the engine (the chapter's ``shrink``) and scales each count
along the line through them to the GPU size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..counters import DEFAULT_GPU, Counters
from ..errors import PmppError
from ..gpus import GPUSpec, gpu_spec

__all__ = ["CONSTANTS", "Prediction", "predict", "predict_counts", "predict_variant", "Load"]

# The model's constants that no data sheet gives: the launch's cost measured, the others fitted on
# the H100's recordings only (pmpp.profiling.predict_validation.fit; the H200 then tests them unchanged).
CONSTANTS = {
    "launch_us": 2.7,              # a launch's fixed cost: an empty kernel timed as the workbook times, H200 (results/predict/)
    "latency_ns": 400.0,           # a global load's latency under load, DRAM to registers
    "instructions_per_block": 1.0,  # SASS warp instructions per warp-level basic block, beyond loads and stores
    "atomic_ns": 1.0,              # one more update of the same address by an atomic, at L2
    "barrier_ns": 50.0,            # one step between two __syncthreads() of a block, its loads aside
    "overlap": 0.3,                # the other resources' share that the slowest one does not hide
}
DRAM_EFFICIENCY = 0.89             # a copy's bandwidth / the data sheet's: H100 0.894, H200 0.878 (results/)
SECTORS_PER_CLOCK = 4              # L1: 128 bytes per clock per SM
WAVEFRONTS_PER_CLOCK = 1           # shared memory: 32 banks x 4 bytes per clock per SM
ISSUE_PER_CLOCK = 4                # one warp instruction per scheduler, 4 schedulers per SM

RESOURCES = ("DRAM", "latency", "L1", "shared memory", "issue", "atomics", "barriers")
GLOBAL = ("ld", "st", "atom")


@dataclass(frozen=True)
class Load:
    """What one run asks of the GPU, from the engine's counts (launches added up)."""

    launches: int
    blocks: float
    warps: float
    requests: float                  # warp-level global loads, stores and atomics
    loads: float                     # of which loads
    load_sectors: float              # the loads' 32-byte sectors
    sectors: float                   # the 32-byte sectors of all the requests
    dram_bytes: float                # per launch the smaller of the sectors' bytes and the arrays'
    shared_wavefronts: float
    shared_instructions: float
    basic_blocks: float
    atomic_max_updates: float        # most updates of one global address
    barriers: float                  # warp-level __syncthreads() executed

    @classmethod
    def of(cls, c: Counters) -> "Load":
        m = c.metrics()
        return cls(
            launches=len(c.kernels),
            blocks=m["engine__blocks.sum"], warps=m["engine__warps.sum"],
            requests=sum(m[f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"] for op in GLOBAL),
            sectors=sum(m[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"] for op in GLOBAL),
            loads=m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
            load_sectors=m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
            dram_bytes=c.summary.get("dram_bytes_estimate", c.requested_bytes),
            shared_wavefronts=sum(m[f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"] for op in GLOBAL),
            shared_instructions=sum(m[f"smsp__sass_inst_executed_op_shared_{op}.sum"] for op in GLOBAL),
            basic_blocks=m["engine__basic_blocks_executed.sum"],
            atomic_max_updates=m["engine__atomic_max_updates_per_address"],
            barriers=m["engine__barriers_executed.sum"])

    def scaled(self, other: "Load", x: float, x_other: float, x_to: float) -> "Load":
        """The load at size ``x_to``, on the line through this one (at size ``x``) and ``other``
        (at ``x_other``); a count that does not grow with the size stays as it is."""
        def along(a: float, b: float) -> float:
            slope = (b - a) / (x_other - x)
            return max(a + slope * (x_to - x), 0.0) if slope > 0 else max(a, b)
        values = {name: along(getattr(self, name), getattr(other, name)) for name in self.__dataclass_fields__}
        values["launches"] = max(self.launches, other.launches)
        return Load(**values)


@dataclass(frozen=True)
class Prediction:
    """A launch's (or a run's) predicted time on ``gpu``, and the resource that bounds it."""

    time_us: float
    bound: str                       # one of RESOURCES, or "launch" where the fixed cost dominates
    gpu: str
    terms: Mapping[str, float] = field(default_factory=dict)   # resource -> microseconds
    occupancy: float | None = None
    launches: int = 1
    note: str = ""                   # how the counts were had (sizes, scaling)

    def __str__(self) -> str:
        terms = ", ".join(f"{k} {_us(v)}" for k, v in sorted(self.terms.items(), key=lambda kv: -kv[1]))
        occ = "" if self.occupancy is None else f", occupancy {self.occupancy:.0%}"
        head = (f"predicted {_us(self.time_us)} on the {self.gpu}, bound by {self.bound} "
                f"({self.launches} launch{'es' if self.launches != 1 else ''}{occ})")
        return f"{head}\n  resources: {terms}" + (f"\n  {self.note}" if self.note else "")

    def _repr_html_(self) -> str:
        import html
        return "<pre>" + html.escape(str(self)) + "</pre>"


def _us(value: float) -> str:
    return f"{value:,.1f} us" if value >= 10 else f"{value:.2f} us"


def predict_counts(load: Load | Counters, gpu: str | GPUSpec = DEFAULT_GPU, *, occupancy: float | None = None,
                   constants: Mapping[str, float] | None = None, note: str = "") -> Prediction:
    """The time of the run ``load`` describes (a :class:`Load`, or the :class:`pmpp.Counters` of
    the launches) on ``gpu``. ``occupancy``: active warps over the SM's maximum (None: full)."""
    load = Load.of(load) if isinstance(load, Counters) else load
    spec = gpu_spec(gpu)
    k = {**CONSTANTS, **(constants or {})}
    terms = resource_times(load, spec, occupancy, k)
    launch_us = load.launches * k["launch_us"]
    bound = max(terms, key=terms.get)
    busy = terms[bound] + k["overlap"] * (_summed(terms) - terms[bound])
    return Prediction(busy + launch_us, bound if terms[bound] >= launch_us else "launch", spec.name,
                      {**terms, "launch": launch_us}, occupancy, load.launches, note)


def _summed(terms: Mapping[str, float]) -> float:
    """The resources' times added up, DRAM's bytes once (as DRAM's time or its latency's)."""
    memory = max(terms["DRAM"], terms["latency"])
    return memory + sum(v for k, v in terms.items() if k not in ("DRAM", "latency"))


def resource_times(load: Load, spec: GPUSpec, occupancy: float | None, k: Mapping[str, float]) -> dict[str, float]:
    """Microseconds each resource needs for ``load`` on ``spec``."""
    clock = spec.clock_mhz * 1e6
    per_launch_blocks = load.blocks / max(load.launches, 1)
    sms = max(1.0, min(spec.sm_count, per_launch_blocks))             # SMs the grid keeps busy
    resident = min(load.warps / max(load.launches, 1),
                   spec.sm_count * spec.max_warps_per_sm * (1.0 if occupancy is None else occupancy))
    bytes_per_load = 32 * load.load_sectors / load.loads if load.loads else 0.0
    in_flight = max(resident, 1.0) * bytes_per_load       # bytes on their way: a load per resident warp
    instructions = load.basic_blocks * k["instructions_per_block"] + load.requests + load.shared_instructions
    warps_per_block = load.warps / load.blocks if load.blocks else 1.0
    blocks_per_sm = max(1.0, spec.max_warps_per_sm * (1.0 if occupancy is None else occupancy) / warps_per_block)
    waves = load.blocks / (spec.sm_count * blocks_per_sm)
    steps = load.barriers / load.warps if load.warps else 0.0       # barriers each block passes
    loads_per_warp = load.loads / load.warps if load.warps else 0.0
    seconds = {
        "DRAM": load.dram_bytes / (spec.dram_gbs * 1e9 * DRAM_EFFICIENCY),
        "latency": load.dram_bytes * k["latency_ns"] * 1e-9 / in_flight if in_flight else 0.0,
        "L1": load.sectors / (SECTORS_PER_CLOCK * sms * clock),
        "shared memory": load.shared_wavefronts / (WAVEFRONTS_PER_CLOCK * sms * clock),
        "issue": instructions / (ISSUE_PER_CLOCK * sms * clock),
        "atomics": load.atomic_max_updates * k["atomic_ns"] * 1e-9,
        # a block's steps between barriers one after another, each waiting for the global loads it makes
        "barriers": max(waves, 1.0) * (min(loads_per_warp, steps + 1) * k["latency_ns"]
                                       + steps * k["barrier_ns"]) * 1e-9,
    }
    return {name: s * 1e6 for name, s in seconds.items()}


# ---------------------------------------------------------------------------------------------
# Any kernel

def predict(kernel, grid, block, args, shared_mem: int = 0, gpu: str | GPUSpec = DEFAULT_GPU) -> Prediction:
    """The predicted time of exactly this launch on ``gpu``: ``kernel`` from ``pmpp.load(...,
    backend="cpu")`` runs once on the CPU engine, counted, with these arguments (their sizes are
    the launch's: a large launch takes the engine's time)."""
    from ..counters import counters
    spec = gpu_spec(gpu)
    counted = counters(kernel, grid, block, args, shared_mem, gpu=spec.name, serial=True)
    occ = _occupancy_of(kernel, block, shared_mem, spec)
    return predict_counts(counted, spec, occupancy=occ, note=_UNKNOWN_OCCUPANCY if occ is None else "")


_UNKNOWN_OCCUPANCY = ("occupancy unknown (no nvcc to read the kernel's registers, and none recorded): "
                      "full occupancy assumed")


def _occupancy_of(kernel, block, shared_mem: int, spec: GPUSpec) -> float | None:
    """The kernel's theoretical occupancy on ``spec``, or None (full) where its registers cannot be
    had (no nvcc and no recording)."""
    from .. import occupancy
    try:
        return occupancy.occupancy(kernel, block, shared_mem, gpu=spec).occupancy
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# A workbook variant at its chapter's GPU size

COUNT_BYTES = 4 * 2 ** 20           # the sizes counted: about this many bytes moved...
COUNT_FLOPS = 50e6                  # ...and at most about this many operations
SPREAD = 4                          # the second size: this many times less work (tiles must differ)


def counted_sizes(chapter, problem: Mapping[str, Any], model) -> tuple[dict, dict]:
    """Two problems the engine counts quickly, the second about a quarter of the first, that scale up to
    ``problem`` (the chapter's ``shrink``)."""
    factor = max(1.0, model.bytes / COUNT_BYTES, model.flops / COUNT_FLOPS)
    return chapter.shrink(problem, factor), chapter.shrink(problem, SPREAD * factor)


def predict_variant(chapter, variant, gpu: str | GPUSpec = DEFAULT_GPU, problem: Mapping[str, Any] | None = None,
                    *, constants: Mapping[str, float] | None = None, path=None, timeout=None) -> Prediction:
    """The predicted time of one run of ``variant`` at ``problem`` (default: the chapter's GPU
    problem) on ``gpu``, from counts at two smaller sizes scaled along their line. ``path``: a
    file standing in for the variant's (a student's submission); ``timeout``: seconds a launch may take."""
    spec = gpu_spec(gpu)
    load, occ, note = variant_load(chapter, variant, spec, problem, with_note=True, path=path, timeout=timeout)
    return predict_counts(load, spec, occupancy=occ, constants=constants, note=note)


def predict_variant_or_none(chapter, variant, gpu: str | GPUSpec = DEFAULT_GPU) -> Prediction | None:
    """:func:`predict_variant` at the chapter's GPU size, or None where the engine refuses to count
    the variant (a race it reports, a feature it lacks): a table's cell left empty."""
    try:
        return predict_variant(chapter, variant, gpu)
    except (PmppError, ValueError):    # the engine's verdicts; count_variant's "launched no kernel"
        return None


def variant_load(chapter, variant, gpu: str | GPUSpec = DEFAULT_GPU, problem: Mapping[str, Any] | None = None,
                 *, with_note: bool = False, path=None, timeout=None):
    """(:class:`Load` of one run of ``variant`` at ``problem``, its occupancy on ``gpu``): counted
    at two sizes the engine runs quickly (:func:`counted_sizes`), scaled along their line."""
    from .. import runner
    from .explain import count_variant
    spec = gpu_spec(gpu)
    variant = chapter.variant(variant) if isinstance(variant, str) else variant
    target = runner.problem_for(variant, problem or chapter.problems["gpu"])
    big, small = (runner.problem_for(variant, p) for p in counted_sizes(chapter, target, variant.model(target)))
    counted_big, counted_small = (count_variant(chapter, variant, p, gpu=spec.name, path=path, timeout=timeout,
                                                serial=True) for p in (big, small))
    x_big, x_small, x = (_size(variant.model(p)) for p in (big, small, target))
    load = Load.of(counted_big)
    if x_big != x_small:
        load = load.scaled(Load.of(counted_small), x_big, x_small, x)
    occ = _variant_occupancy(chapter, variant, counted_big, spec, path)
    if not with_note:
        return load, occ
    note = (f"counted at {chapter.describe(big)} and {chapter.describe(small)}, scaled to "
            f"{chapter.describe(target)}" + ("; " + _UNKNOWN_OCCUPANCY if occ is None else ""))
    return load, occ, note


def _size(model) -> float:
    return model.bytes or model.flops


def _variant_occupancy(chapter, variant, counted: Counters, spec: GPUSpec, path=None) -> float | None:
    """Occupancy of the variant's launch that has the most blocks."""
    from .. import runner
    name, grid, block, shared = max(counted.kernels, key=lambda k: math.prod(_dims(k[1])))
    module = runner.load_variant(chapter, variant, backend="cpu", path=path)
    return _occupancy_of(module.get_function(name), block, shared, spec)


def _dims(d) -> Sequence[int]:
    return (d,) if isinstance(d, int) else tuple(d)


# ---------------------------------------------------------------------------------------------
# Where students see it

def add_predictions(chapter, entries: list[dict], gpu: str | GPUSpec = DEFAULT_GPU) -> str:
    """Give each variant row of a CPU-engine run (``pmpp.runner.measure``) its predicted time on
    ``gpu`` at the chapter's GPU size (``predicted_us``, ``predicted_bound``, ``predicted_gpu``);
    a variant the engine cannot count gets none. Returns the line that says what the column is."""
    spec = gpu_spec(gpu)
    by_name = {v.name: v for v in chapter.variants}
    for entry in entries:
        variant = by_name.get(entry["name"])
        if entry["kind"] != "variant" or entry.get("skipped") or variant is None or variant.gpu_only:
            continue
        p = predict_variant_or_none(chapter, variant, spec)
        if p is None:
            continue
        entry.update(predicted_us=p.time_us, predicted_bound=p.bound, predicted_gpu=spec.name)
    return (f"pred. {spec.name} us: the time pmpp's model predicts for one run at the chapter's GPU size on an "
            f"{spec.name}, from the CPU engine's counts (pmpp.predict; how close it comes to two GPUs' "
            "recordings: docs/predicted.md).")

