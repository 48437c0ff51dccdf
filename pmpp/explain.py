"""Why each variant of a chapter is fast: the CPU engine's counters, per variant, side by side.

    rows = chapter_table(chapters.get("reduction"))
    print(format_chapter_table(rows))        # what `pmpp profile --cpu reduction` prints

Each variant runs once at the chapter's CPU-engine size on inputs from a fixed seed (the same
inputs as the Nsight Compute recording in results/counters/), counted for an H100 (its SM count
sizes grid-stride launches); a variant that launches several kernels is the sum of its launches.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .counters import DEFAULT_GPU, Counters, counting_module
from .ncu import SEED


def count_variant(chapter, variant, problem: Mapping[str, Any] | None = None, *, seed: int = SEED,
                  gpu: str = DEFAULT_GPU, sample_warp: tuple = (0, 0)) -> Counters:
    """The counters of one run of ``variant`` (all its launches added up) on the CPU engine."""
    from . import runner
    variant = chapter.variant(variant) if isinstance(variant, str) else variant
    problem = runner.problem_for(variant, problem or chapter.problems["cpu"])
    plain = runner.load_variant(chapter, variant, backend="cpu")
    module = counting_module(plain, gpu=gpu, sample_warp=sample_warp)
    inputs = chapter.make_inputs(problem, np, np.random.default_rng(seed))
    module.launches.clear()
    variant.launch(module, problem, inputs)
    if not module.launches:
        raise ValueError(f"{chapter.name} {variant.name} launched no kernel at {chapter.describe(problem)}")
    total = module.launches[0]
    for more in module.launches[1:]:
        total = total + more
    return total


def chapter_table(chapter, variants: Sequence[str] | None = None, *, seed: int = SEED,
                  gpus: Sequence[str] = ("H100", "T4")) -> list[dict]:
    """One row per variant: the counters that explain its speed, and its occupancy on ``gpus``."""
    chosen = [chapter.variant(v) for v in variants] if variants else list(chapter.variants)
    rows = []
    for variant in chosen:
        if variant.gpu_only:
            continue
        c = count_variant(chapter, variant, seed=seed)
        rows.append({"variant": variant.name, "counters": c, **summary(c),
                     **{f"occupancy_{g}": _occupancy(chapter, variant, c, g) for g in gpus}})
    return rows


def summary(c: Counters) -> dict:
    """The few numbers that tell variants apart."""
    m = c.metrics()
    shared_wf = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] + m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
    shared_inst = m["smsp__sass_inst_executed_op_shared_ld.sum"] + m["smsp__sass_inst_executed_op_shared_st.sum"]
    return {
        "ld_sectors_per_request": m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
        "st_sectors_per_request": m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"],
        "shared_wavefronts_per_request": shared_wf / shared_inst if shared_inst else 0.0,
        "bank_conflicts": m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        + m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"],
        "active_lanes": m["smsp__thread_inst_executed_per_inst_executed.ratio"],
        "atomics": m["engine__atomics.sum"],
        "requested_bytes": c.requested_bytes,
        "launches": len(c.kernels),
    }


def _occupancy(chapter, variant, c: Counters, gpu: str):
    """Theoretical occupancy of the variant's first kernel on ``gpu`` (None where it cannot be had)."""
    try:
        from . import occupancy, runner
    except ImportError:
        return None
    name, _grid, block, shared = c.kernels[0]
    try:
        module = runner.load_variant(chapter, variant, backend="cpu")
        return occupancy.occupancy(module.get_function(name), block, shared, gpu=gpu)
    except Exception as exc:     # no nvcc and no recording, or not for this GPU: say so in the table
        return exc


def format_chapter_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows of :func:`chapter_table` as a terminal table."""
    gpus = [k[len("occupancy_"):] for k in (rows[0] if rows else {}) if k.startswith("occupancy_")]
    head = (f"{'variant':<28} {'ld sect/req':>11} {'st sect/req':>11} {'shared wavef/req':>16} "
            f"{'bank confl.':>11} {'lanes/inst':>10} {'atomics':>9}" + "".join(f" {'occ. ' + g:>10}" for g in gpus))
    lines = [head, "-" * len(head)]
    for r in rows:
        occ = "".join(f" {_occ_text(r['occupancy_' + g]):>10}" for g in gpus)
        lines.append(f"{r['variant']:<28} {_num(r['ld_sectors_per_request']):>11} {_num(r['st_sectors_per_request']):>11} "
                     f"{_num(r['shared_wavefronts_per_request']):>16} {int(r['bank_conflicts']):>11,} "
                     f"{r['active_lanes']:>10.1f} {int(r['atomics']):>9,}{occ}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:.2f}" if x else "-"


def _occ_text(occ) -> str:
    if occ is None or isinstance(occ, Exception):
        return "n/a"
    return f"{occ.occupancy:.0%}"


def traffic(chapter, variants: Sequence[str] | None = None, *, recording=None) -> list[dict]:
    """Bytes per variant three ways, at the chapter's CPU-engine size: what the book's model says
    must move (``model_bytes``), what the warps ask L1 for (``requested_bytes``: global sectors x
    32, counted here), and what reached DRAM on the GPU (``dram_bytes``: read + written, measured
    by Nsight Compute in results/counters/, cold caches before each launch; None where not
    recorded). Each with its arithmetic intensity (the model's operations over those bytes)."""
    from . import ncu, runner
    recording = recording if recording is not None else ncu.recorded(chapter.name)
    profile = recording["profiles"].get(chapter.name) if recording else None
    seed = profile["seed"] if profile else SEED
    measured = {v["variant"]: v["launches"] for v in profile["variants"]} if profile else {}
    chosen = [chapter.variant(v) for v in variants] if variants else list(chapter.variants)
    rows = []
    for variant in chosen:
        if variant.gpu_only or variant.racy:
            continue
        problem = runner.problem_for(variant, chapter.problems["cpu"])
        model = variant.model(problem)
        launches = measured.get(variant.name)
        dram = None
        if launches and all("dram__bytes_read.sum" in l["metrics"] for l in launches):
            dram = sum(l["metrics"]["dram__bytes_read.sum"] + l["metrics"].get("dram__bytes_write.sum", 0.0)
                       for l in launches)
        requested = count_variant(chapter, variant, seed=seed).requested_bytes
        rows.append({"variant": variant.name, "flops": model.flops, "model_bytes": model.bytes,
                     "requested_bytes": requested, "dram_bytes": dram,
                     "model_intensity": model.flops / model.bytes if model.bytes else None,
                     "requested_intensity": model.flops / requested if requested else None,
                     "dram_intensity": model.flops / dram if dram else None})
    return rows
