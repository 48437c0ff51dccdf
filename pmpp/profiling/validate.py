"""The CPU engine's counters beside Nsight Compute's, recorded on a GPU for the same launches.

    rows = compare_chapter(chapters.get("reduction"))     # one row per (variant, metric)
    print(format_comparison(rows))

Both sides run each variant once at the chapter's CPU-engine size on inputs from the same seed
(:data:`pmpp.ncu.SEED`), the GPU in ``results/counters/`` (``pmpp profile --counters``), the
engine here (:func:`pmpp.explain.count_variant`); a variant's launches are added up. A pair agrees
when the engine's number is within 10% of ncu's; pairs where both are 0 say nothing and are left
out.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from . import ncu
from ..counters import Counters

TOLERANCE = 0.10

# engine metric -> the ncu metrics that add up to it
PAIRS = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    # ncu counts an atomic whose old value is unused as a reduction (op_red), the others as op_atom
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum": ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
                                                          "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum": ("l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",
                                                         "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"),
    "smsp__sass_inst_executed_op_shared_ld.sum": ("smsp__sass_inst_executed_op_shared_ld.sum",),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "smsp__sass_inst_executed_op_shared_st.sum": ("smsp__sass_inst_executed_op_shared_st.sum",),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "smsp__sass_inst_executed_op_shared_atom.sum": ("smsp__sass_inst_executed_op_shared_atom.sum",),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",),
}
RATIO = "smsp__thread_inst_executed_per_inst_executed.ratio"   # from the sums, over all launches


def ncu_totals(launches: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """ncu's side of every pair, added up over a variant's launches (None: not recorded)."""
    def total(name):
        values = [launch["metrics"].get(name) for launch in launches]
        return None if any(v is None for v in values) else sum(values)
    found = {}
    for engine_name, parts in PAIRS.items():
        values = [total(p) for p in parts]
        found[engine_name] = None if any(v is None for v in values) else sum(values)
    threads, inst = total("smsp__thread_inst_executed.sum"), total("smsp__inst_executed.sum")
    found[RATIO] = threads / inst if threads is not None and inst else None
    return found


def pair_rows(group: str, engine: Counters, launches: Sequence[Mapping[str, Any]], chapter: str = "cases") -> list[dict]:
    """One row per metric with a nonzero side: engine, ncu, their ratio, and whether they agree."""
    theirs = ncu_totals(launches)
    ours = engine.metrics()
    rows = []
    for name, recorded in theirs.items():
        mine = ours.get(name)
        if recorded is None or mine is None or (recorded == 0 and mine == 0):
            continue
        rows.append({"chapter": chapter, "group": group, "metric": name, "engine": float(mine), "ncu": float(recorded),
                     "ratio": mine / recorded if recorded else float("inf"),
                     "agrees": abs(mine - recorded) <= TOLERANCE * abs(recorded), "exact": mine == recorded})
    return rows


def compare_chapter(chapter, recording: Mapping[str, Any] | None = None,
                    variants: Iterable[str] | None = None) -> list[dict]:
    """Every recorded variant of ``chapter``: the engine's counters against ncu's."""
    from .explain import count_variant
    recording = recording or ncu.recorded(chapter.name)
    if recording is None:
        raise FileNotFoundError(f"no Nsight Compute recording of {chapter.name} in results/counters/: "
                                f"record one on a GPU with 'pmpp profile --counters {chapter.name}'")
    profile = recording["profiles"][chapter.name]
    wanted = None if variants is None else {chapter.variant(v).name for v in variants}
    rows = []
    for entry in profile["variants"]:
        if (wanted is not None and entry["variant"] not in wanted) or chapter.variant(entry["variant"]).gpu_only:
            continue
        engine = count_variant(chapter, entry["variant"], profile["problem"], seed=profile["seed"])
        rows += pair_rows(entry["variant"], engine, entry["launches"], chapter.name)
    return rows


def agreement(rows: Sequence[Mapping[str, Any]]) -> float:
    """The share of pairs within the tolerance."""
    return sum(r["agrees"] for r in rows) / len(rows) if rows else 1.0


def short_name(metric: str) -> str:
    """A metric name short enough for a table column."""
    for old, new in (("l1tex__t_requests_pipe_lsu_mem_global_op_", "global requests "),
                     ("l1tex__t_sectors_pipe_lsu_mem_global_op_", "global sectors "),
                     ("smsp__sass_inst_executed_op_shared_", "shared instructions "),
                     ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_", "shared wavefronts "),
                     ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_", "bank conflicts "),
                     ("smsp__thread_inst_executed_per_inst_executed", "threads per instruction")):
        if metric.startswith(old):
            return (new + metric[len(old):]).rsplit(".", 1)[0]
    return metric


def format_comparison(rows: Sequence[Mapping[str, Any]], *, only_disagreements: bool = False) -> str:
    """The rows as a terminal table."""
    shown = [r for r in rows if not only_disagreements or not r["agrees"]]
    head = f"{'variant':<28} {'metric':<28} {'engine':>14} {'ncu':>14} {'engine/ncu':>10}"
    lines = [head, "-" * len(head)]
    for r in shown:
        mark = "" if r["agrees"] else "  <-- off"
        lines.append(f"{r['group']:<28} {short_name(r['metric']):<28} {r['engine']:>14,.2f} {r['ncu']:>14,.2f} "
                     f"{r['ratio']:>10.3f}{mark}")
    lines.append(f"{agreement(rows):.1%} of {len(rows)} pairs within ±{TOLERANCE:.0%}; "
                 f"{sum(r['exact'] for r in rows)} exact")
    return "\n".join(lines)


def compare_cases(cases: Sequence[Mapping[str, Any]], kernel_file, recording: Mapping[str, Any] | None = None) -> list[dict]:
    """The hand-counted kernels (``tests/counter_cases.py``): the engine's counters against ncu's."""
    from pathlib import Path

    import numpy as np

    from ..counters import counters
    from ..loader import load
    recording = recording or ncu.recorded("cases")
    if recording is None:
        raise FileNotFoundError("no Nsight Compute recording of the cases in results/counters/")
    profile = recording["profiles"]["cases"]
    module = load(source=Path(kernel_file).read_text(), filename=Path(kernel_file).name, backend="cpu")
    by_name = {c["name"]: c for c in cases}
    rows = []
    for entry in profile["cases"]:
        case = by_name[entry["case"]]
        args = ncu.case_arguments(case, np, profile["seed"])
        engine = counters(module.get_function(case["kernel"]), tuple(case["grid"]), tuple(case["block"]), args,
                          case.get("shared_mem", 0))
        rows += pair_rows(entry["case"], engine, entry["launches"])
    return rows


# Why a pair disagrees, for every disagreement in the recording (tests/test_validate.py checks that
# none is left without one). Each was found by reading the pair's source lines and, for the GPU
# side, the SASS that nvcc makes of them (pmpp.compilecheck.sass).
REASONS = {
    "bank-counter": (
        "ncu's bank-conflict counter is a count of the L1 data stage, not the wavefronts an "
        "instruction needs beyond its minimum (the engine's number, and what Nsight Compute's source "
        "view compares: L1 Wavefronts Shared against L1 Wavefronts Shared Ideal). Here the wavefronts "
        "agree, so every instruction took its minimum, yet ncu's counter reports conflicts."),
    "predication": (
        "Threads per instruction are counted per basic block of the CPU build; nvcc turns short "
        "branches into predicated instructions, which ncu counts with all lanes of the warp active "
        "(the engine counts only the lanes that take the branch), and blocks hold different numbers "
        "of instructions on the two machines."),
    "vector-shared": (
        "nvcc merges a thread's loads of 4 consecutive shared-memory words in an unrolled loop "
        "(filter_s[ty][i .. i+3]) into one 128-bit LDS.128 (SASS: 16 LDS and 4 LDS.128 per tile in "
        "02_shared_tiles): fewer instructions, and the wavefronts and conflicts of a wider access. "
        "The CPU compiler keeps them four 32-bit loads."),
    "register-reuse": (
        "nvcc keeps a value the thread has just stored to shared memory in a register and reuses it "
        "(XY[first + j - 1] in the sequential scan of each thread's elements), where the CPU "
        "compiler loads it back: more shared-memory loads on the engine."),
    "cas-retries": (
        "The half-precision atomicAdd is a compare-and-swap loop: on the GPU lanes and warps that "
        "race for the one output word fail and try again (about a thousand times per warp here); "
        "the engine's lanes run one after another and never fail."),
    "global-atomics-l1": (
        "ncu counts shared-pipe atomic wavefronts for a kernel with no shared memory: its global "
        "atomics pass through the L1 data stage; the engine counts shared-memory atomics only."),
    "atomic-values": (
        "Shared-memory atomics of lanes that add different values to one address take more "
        "wavefronts on the H100 than one per bank (the hand-counted atomics, where every lane adds 1, "
        "take one); the engine costs atomics like loads."),
    "ldgsts-l1": (
        "cp.async copies of 4 bytes (LDGSTS.E in 09's SASS, which pass through L1) are counted by ncu "
        "among global load requests and sectors; the engine leaves cp.async copies out of loads, as "
        "ncu does for the 16-byte ones that bypass L1 (LDGSTS.E.BYPASS.128: scan 11 agrees)."),
    "broadcast-128": (
        "A 128-bit shared load is served a quarter-warp at a time (4 wavefronts, the engine's count), "
        "but where the warp reads only 4 distinct 16-byte pieces (09's filter fragment, a broadcast) "
        "the H100 takes 2: ncu's total is 2 for that line and 4 for the other (2 x 6,912 + 4 x 3,456)."),
    "select-vs-branch": (
        "A value chosen by a condition and then stored (top ? load4(...) : zero) is one selected "
        "store for nvcc and a store in each branch for the CPU compiler: two instructions when "
        "the warp's lanes take both branches."),
}

# (chapter, variants or None for all, metric substring, reason); the first rule that matches.
RULES = (
    ("implicit_gemm", ("02_shared_tiles", "03_warp_tile", "04_thread_tile", "05_large_tile", "06_double_buffer",
                       "07_rsc_order"), "mem_shared_op_ld", "vector-shared"),
    ("implicit_gemm", ("02_shared_tiles", "03_warp_tile"), "op_shared_ld", "vector-shared"),
    ("scan", ("05_three_phase", "06_hierarchical", "07_stream_based", "08_decoupled_lookback",
              "12_bulk_copy_lookback"), "shared", "register-reuse"),
    ("histogram", ("13_dot_half_atomic",), "global_op_atom", "cas-retries"),
    ("histogram", ("13_dot_half_atomic", "14_dot_fast_atomic_add"), "shared_op_atom", "global-atomics-l1"),
    ("histogram", ("07_aggregation", "12_register_counts"), "shared_op_atom", "atomic-values"),
    ("stencil", ("06_vectorized",), "op_shared_st", "select-vs-branch"),
    ("implicit_gemm", ("09_register_blocking",), "global_op_ld", "ldgsts-l1"),
    ("implicit_gemm", ("09_register_blocking",), "mem_shared_op_ld", "broadcast-128"),
    (None, None, "per_inst_executed", "predication"),
    (None, None, "bank_conflicts", "bank-counter"),
)


def reason(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The key in :data:`REASONS` of a disagreeing pair, or None if none applies. The bank-counter
    reason holds only where the engine's and ncu's wavefronts for the same accesses agree."""
    for chapter, variants, metric, why in RULES:
        if (chapter is None or row.get("chapter") == chapter) and (variants is None or row["group"] in variants) \
                and metric in row["metric"]:
            if why == "bank-counter" and not _wavefronts_agree(row, rows):
                return None
            return why
    return None


def _wavefronts_agree(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> bool:
    wavefronts = row["metric"].replace("data_bank_conflicts_pipe_lsu_mem", "data_pipe_lsu_wavefronts_mem")
    twins = [r for r in rows if r["group"] == row["group"] and r.get("chapter") == row.get("chapter")
             and r["metric"] == wavefronts]
    return bool(twins) and all(t["agrees"] for t in twins)


def compare_all(recording: Mapping[str, Any] | None = None, cases=None, kernel_file=None) -> list[dict]:
    """Every chapter of the recording (and the hand-counted cases, if given)."""
    from .. import chapters
    recording = recording or ncu.recorded("reduction")
    rows = []
    if cases is not None:
        rows += compare_cases(cases, kernel_file, recording)
    for name in chapters.names():
        if name in recording["profiles"]:
            rows += compare_chapter(chapters.get(name), recording)
    return rows


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def disagreement_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: every pair outside the tolerance, with its reason."""
    lines = ["| chapter | variant | counter | engine | ncu | engine/ncu | why |", "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        if not r["agrees"]:
            lines.append(f"| {r.get('chapter', '')} | {r['group']} | {short_name(r['metric'])} | {_fmt(r['engine'])} | "
                         f"{_fmt(r['ncu'])} | {r['ratio']:.2f} | {reason(r, rows) or 'unexplained'} |")
    lines += ["", *[f"* **{key}**: {text}" for key, text in REASONS.items()
                    if any(not r["agrees"] and reason(r, rows) == key for r in rows)]]
    return "\n".join(lines)


def summary_line(rows: Sequence[Mapping[str, Any]]) -> str:
    glob = [r for r in rows if "global_op_ld" in r["metric"] or "global_op_st" in r["metric"]]
    return (f"{agreement(rows):.1%} of {len(rows)} pairs agree within ±{TOLERANCE:.0%} "
            f"({sum(r['exact'] for r in rows)} exactly); global load and store requests and sectors: "
            f"{sum(r['exact'] for r in glob)} of {len(glob)} exact, {agreement(glob):.0%} within ±{TOLERANCE:.0%}.")


def engine_compiler() -> str:
    """The C++ compiler that builds the CPU engine's modules here (its version line): the engine's
    counts are those of the code it makes, so they can differ a little from one compiler to
    another (with g++ 13.3 the engine counts twice the shared loads that g++ 12.2 and nvcc make in
    reduction 14, 15 and 17)."""
    from ..backends.cpu.toolchain import compiler
    return compiler()[1]


def report(rows: Sequence[Mapping[str, Any]], recording: Mapping[str, Any]) -> str:
    """docs/counters-validation.md: the engine against the recording, every pair."""
    device, versions = recording["device"], recording["versions"]
    out = [
        "# The CPU engine's counters against Nsight Compute's",
        "",
        f"Nsight Compute ({versions.get('ncu')}) on an {device['name']} (driver {versions.get('driver')}, "
        f"CuPy {versions.get('cupy')}), {recording['date'][:10]}, commit {recording['commit']}: "
        f"`results/counters/{ncu.default_path(device, recording['commit']).name}`. "
        "Every variant ran once at its chapter's CPU-engine size on inputs drawn from the seed "
        f"{ncu.SEED}; the hand-counted kernels are `tests/kernels/counters.cu`. The engine counts the "
        "same launches on the same inputs (`pmpp.validate.compare_all`); a variant's launches are "
        "added up. Pairs where both sides are 0 are left out.",
        "",
        f"The engine's modules were compiled by {engine_compiler()}. Its counts are those of the code the "
        "compiler makes, and another compiler can make a few accesses differently: with g++ 13.3 (on "
        "the H100 machine) the engine counted twice the shared-memory loads of reduction 14, 15 and 17 "
        "that it counts with g++ 12.2 and that Nsight Compute counted (2,114 against 1,057 for 14), "
        "and 93.0% of the pairs agreed.",
        "",
        summary_line(rows),
        "",
        "Regenerate with `python -m pmpp.profiling.validate` (the test suite checks that this file is current).",
        "",
        "## Where they disagree, and why",
        "",
        disagreement_table(rows),
        "",
        "## Every pair",
    ]
    by_chapter: dict[str, list] = {}
    for r in rows:
        by_chapter.setdefault(r.get("chapter", "cases"), []).append(r)
    for chapter, chapter_rows in by_chapter.items():
        out += ["", f"### {chapter}: {agreement(chapter_rows):.0%} of {len(chapter_rows)}", "",
                "| variant | counter | engine | ncu | engine/ncu |", "|---|---|---:|---:|---:|"]
        out += [f"| {r['group']} | {short_name(r['metric'])} | {_fmt(r['engine'])} | {_fmt(r['ncu'])} | "
                f"{r['ratio']:.3f}{'' if r['agrees'] else ' ✗'} |" for r in chapter_rows]
    return "\n".join(out) + "\n"


REPORT = "docs/counters-validation.md"
README_BEGIN, README_END = "<!-- counters-validation:begin -->", "<!-- counters-validation:end -->"


def readme_section(rows: Sequence[Mapping[str, Any]]) -> str:
    """What the CPU engine's README says between its validation markers."""
    return (f"{README_BEGIN}\nCounted with {engine_compiler()}: {summary_line(rows)}\n\n{disagreement_table(rows)}\n"
            f"{README_END}")


def _regenerate() -> None:
    """Rewrite docs/counters-validation.md and the CPU engine README's section from a fresh comparison."""
    import re
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tests"))
    from counter_cases import CASES, KERNEL_FILE
    recording = ncu.recorded("cases")
    rows = compare_all(recording, CASES, KERNEL_FILE)
    (root / REPORT).parent.mkdir(exist_ok=True)
    (root / REPORT).write_text(report(rows, recording))
    readme = root / "pmpp" / "backends" / "cpu" / "README.md"
    text = readme.read_text()
    pattern = re.escape(README_BEGIN) + ".*?" + re.escape(README_END)
    readme.write_text(re.sub(pattern, lambda m: readme_section(rows), text, flags=re.S))
    print(summary_line(rows))


if __name__ == "__main__":
    _regenerate()


def recorded_counters(chapter: str, variant: str, recording: Mapping[str, Any] | None = None) -> dict:
    """What Nsight Compute counted for one run of ``variant`` (its launches added up), under the
    engine's metric names (:data:`PAIRS`, and the threads per instruction), from results/counters/."""
    recording = recording or ncu.recorded(chapter)
    if recording is None:
        raise FileNotFoundError(f"no Nsight Compute recording of {chapter} in results/counters/")
    for entry in recording["profiles"][chapter]["variants"]:
        if entry["variant"] == variant:
            return {name: value for name, value in ncu_totals(entry["launches"]).items() if value is not None}
    raise KeyError(f"the recording has no {chapter} {variant}")
