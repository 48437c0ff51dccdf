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

from ..counters import DEFAULT_GPU, Counters, counted_run, counting_module
from .ncu import SEED


def count_variant(chapter, variant, problem: Mapping[str, Any] | None = None, *, seed: int = SEED,
                  gpu: str = DEFAULT_GPU, sample_warp: tuple = (0, 0), path=None, timeout=None,
                  serial: bool = False) -> Counters:
    """The counters of one run of ``variant`` (all its launches added up) on the CPU engine. The
    same run asked for again (a chapter table, then the bytes three ways) is counted once: the
    result is kept with the count build of the variant's file. ``path``: another file standing in
    for the variant's (a student's); ``timeout``: seconds a launch may take; ``serial``: the blocks one
    after another on one thread (:func:`pmpp.counters.counting_module`)."""
    from .. import runner
    variant = chapter.variant(variant) if isinstance(variant, str) else variant
    problem = runner.problem_for(variant, problem or chapter.problems["cpu"])
    plain = runner.load_variant(chapter, variant, backend="cpu", path=path, timeout=timeout)
    module = counting_module(plain, gpu=gpu, sample_warp=sample_warp, timeout=timeout, serial=serial)
    counted = module.__dict__.setdefault("counted_runs", {})
    key = (variant.name, repr(sorted(problem.items())), seed, tuple(sample_warp), serial)
    if key not in counted:
        inputs = chapter.make_inputs(problem, np, np.random.default_rng(seed))
        try:
            counted[key] = counted_run(module, lambda: variant.launch(module, problem, inputs))
        except ValueError as exc:
            raise ValueError(f"{chapter.name} {variant.name} {exc} at {chapter.describe(problem)}") from None
    return counted[key]


class ChapterTable(list):
    """Rows of :func:`chapter_table`: a plain list that prints as a terminal table and shows as an
    HTML table in a notebook."""

    def __str__(self) -> str:
        return format_chapter_table(self)

    def _repr_html_(self) -> str:
        import html
        head, rows = _cells(self)
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td style='text-align:right'>{html.escape(c)}</td>" for c in row) + "</tr>"
                      for row in rows)
        return (f"<table><tr>{th}</tr>{trs}</table><p>Counted on pmpp's CPU engine at the chapter's CPU size "
                "(sectors per request against the ideal for the access width); occupancy is theoretical.</p>")


def chapter_table(chapter, variants: Sequence[str] | None = None, *, seed: int = SEED,
                  gpus: Sequence[str] = ("H100", "T4")) -> "ChapterTable":
    """One row per variant: the counters that explain its speed, and its occupancy on ``gpus``."""
    chosen = [chapter.variant(v) for v in variants] if variants else list(chapter.variants)
    rows = []
    for variant in chosen:
        if variant.gpu_only:
            continue
        c = count_variant(chapter, variant, seed=seed)
        rows.append({"variant": variant.name, "counters": c, **summary(c),
                     **{f"occupancy_{g}": _occupancy(chapter, variant, c, g) for g in gpus}})
    return ChapterTable(rows)


def summary(c: Counters) -> dict:
    """The few numbers that tell variants apart."""
    m = c.metrics()
    shared_wf = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] + m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
    shared_inst = m["smsp__sass_inst_executed_op_shared_ld.sum"] + m["smsp__sass_inst_executed_op_shared_st.sum"]
    return {
        "ld_sectors_per_request": m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"],
        "ld_ideal": _ideal(c, "ld"),
        "st_sectors_per_request": m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"],
        "st_ideal": _ideal(c, "st"),
        "shared_wavefronts_per_request": shared_wf / shared_inst if shared_inst else 0.0,
        "bank_conflicts": m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        + m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"],
        "active_lanes": m["smsp__thread_inst_executed_per_inst_executed.ratio"],
        "atomics": m["engine__atomics.sum"],
        "requested_bytes": c.requested_bytes,
        "launches": len(c.kernels),
    }


def _ideal(c: Counters, op: str) -> float:
    """Sectors per request a perfectly coalesced access of the same widths would take."""
    rows = [a for a in c.accesses if a.space == "global" and a.op == op]
    requests = sum(a.executed for a in rows)
    return sum(a.executed * a.ideal_sectors_per_request for a in rows) / requests if requests else 0.0


def _occupancy(chapter, variant, c: Counters, gpu: str):
    """Theoretical occupancy on ``gpu`` of the variant's most constrained kernel (the lowest over
    its distinct launches), or the exception that says why it cannot be had."""
    from .. import occupancy, runner
    try:
        module = runner.load_variant(chapter, variant, backend="cpu")
        found = [occupancy.occupancy(module.get_function(name), block, shared, gpu=gpu)
                 for name, block, shared in {(k[0], tuple(k[2]), k[3]) for k in c.kernels}]
    except Exception as exc:     # no nvcc and no recording, or not for this GPU: say so in the table
        return exc
    return min(found, key=lambda o: o.occupancy)


def _cells(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The header and the cells of a chapter table."""
    gpus = [k[len("occupancy_"):] for k in (rows[0] if rows else {}) if k.startswith("occupancy_")]
    head = ["variant", "ld sect/req", "st sect/req", "shared wavef/req", "bank confl.", "lanes/inst", "atomics",
            *(f"occ. {g}" for g in gpus)]
    body = [[r["variant"], _req(r, "ld"), _req(r, "st"), _num(r["shared_wavefronts_per_request"]),
             f"{int(r['bank_conflicts']):,}", f"{r['active_lanes']:.1f}", f"{int(r['atomics']):,}",
             *(_occ_text(r["occupancy_" + g]) for g in gpus)] for r in rows]
    predicted = next((r["predicted"] for r in rows if r.get("predicted")), None)
    if predicted is not None:      # pmpp.profiling.predict's time at the GPU size, where asked for
        head += [f"pred. {predicted.gpu} us", "bound by"]
        for cells, r in zip(body, rows):
            p = r.get("predicted")
            cells += [f"{p.time_us:,.1f}", p.bound] if p else ["-", "-"]
    return head, body


def format_chapter_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows of :func:`chapter_table` as a terminal table."""
    head, body = _cells(rows)
    widths = [max(len(c) for c in column) for column in zip(head, *body)]
    line = lambda cells: " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), "-" * len(line(head)), *map(line, body)])


def _req(row: Mapping[str, Any], op: str) -> str:
    """``"8.0/4"``: sectors per request against the ideal."""
    got = row[f"{op}_sectors_per_request"]
    return f"{got:.1f}/{row[f'{op}_ideal']:.0f}" if got else "-"


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
    from .. import runner
    from . import ncu
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
        dram = dram_read = None
        if launches and all("dram__bytes_read.sum" in l["metrics"] for l in launches):
            dram_read = sum(l["metrics"]["dram__bytes_read.sum"] for l in launches)
            dram = dram_read + sum(l["metrics"].get("dram__bytes_write.sum", 0.0) for l in launches)
        requested = count_variant(chapter, variant, seed=seed).requested_bytes
        rows.append({"variant": variant.name, "problem": chapter.describe(problem), "flops": model.flops,
                     "model_bytes": model.bytes,
                     "requested_bytes": requested, "dram_bytes": dram, "dram_read_bytes": dram_read,
                     "model_intensity": model.flops / model.bytes if model.bytes else None,
                     "requested_intensity": model.flops / requested if requested else None,
                     "dram_intensity": model.flops / dram if dram else None})
    return rows
