"""Nsight Compute's counters of every variant, recorded on a GPU, to check the CPU engine's against.

``pmpp profile --counters reduction`` runs each variant of the chapter once at the size the CPU
engine runs it (the chapter's ``"cpu"`` problem, inputs drawn from a fixed seed) under ``ncu``,
one child process per chapter, and records every kernel launch's counters in
``results/counters/<device>-<commit>.json``. :func:`pmpp.validate.compare` puts the engine's
counts beside them. The hand-counted kernels of ``tests/kernels/counters.cu`` are recorded the same
way (:func:`profile_cases`).

The child logs the launches it makes (kernel, grid, block) on stdout; ncu profiles those and any
launch CuPy makes on its own (a fill, a copy), which are told apart by kernel name and dropped.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from .profile import ProfilerError, add_to_recording, find_ncu, recording_path, recordings_with

SEED = 20261125           # inputs of every recorded and counted run: the same on GPU and engine
LAUNCH_LOG = "PMPP-LAUNCHES "

# What is recorded: the counters the engine has a counterpart for, and the ones that explain
# where it cannot agree (op_red: atomics whose result is unused; ldgsts: cp.async; pred_on:
# lanes predicated off), and the occupancy Nsight Compute computes for the launch.
METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "smsp__sass_inst_executed_op_shared_atom.sum",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_global_st.sum",
    "smsp__sass_inst_executed_op_global_atom.sum",
    "smsp__sass_inst_executed_op_global_red.sum",
    "smsp__sass_thread_inst_executed_op_global_ld.sum",
    "smsp__sass_thread_inst_executed_op_shared_ld.sum",
    "smsp__inst_executed.sum",
    "smsp__thread_inst_executed.sum",
    "smsp__thread_inst_executed_pred_on.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "smsp__inst_executed_op_barrier.sum",
    "smsp__sass_inst_executed_op_barrier.sum",
    "smsp__inst_executed_op_branch.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "sm__maximum_warps_per_active_cycle_pct",
)


def available_metrics(ncu: str) -> set[str] | None:
    """The base names ``ncu --query-metrics`` lists for this GPU, or None if it cannot say."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    names = {line.split()[0] for line in out.stdout.splitlines() if re.match(r"^[a-z0-9]+__\w+", line)}
    return names or None


def usable(metrics: Sequence[str], known: set[str] | None) -> list[str]:
    """``metrics`` less the hardware counters this ncu does not list (launch__ ones always kept)."""
    if known is None:
        return list(metrics)
    return [m for m in metrics if m.startswith("launch__") or m.split(".", 1)[0] in known or m in known]


def parse_csv(text: str) -> list[dict]:
    """ncu ``--csv --print-units base`` output -> one dict per profiled launch, in launch order:
    ``{"kernel", "grid", "block", "metrics": {name: number}}``."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if "Metric Name" not in row or "ID" not in row:
            continue
        launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"], "grid": _dims(row.get("Grid Size")),
                                                 "block": _dims(row.get("Block Size")), "metrics": {}})
        value = row["Metric Value"].replace(",", "")
        try:
            launch["metrics"][row["Metric Name"]] = float(value)
        except ValueError:
            continue   # "n/a": ncu could not collect it for this launch
    return [launches[k] for k in sorted(launches, key=int)]


def _dims(text: str | None) -> list[int]:
    return [int(v) for v in re.findall(r"\d+", text or "")]


def base_name(kernel: str) -> str:
    """``"void reduce5<256>(const float *, ...)"`` or ``"reduce5<256>"`` -> ``"reduce5"``."""
    m = re.match(r"^(?:void\s+)?([A-Za-z_]\w*)", kernel.strip())
    return m.group(1) if m else kernel


def match_launches(profiled: Sequence[Mapping], logged: Sequence[Mapping]) -> list[dict]:
    """Pair each logged launch (``{"group", "kernel", "grid", "block"}``) with the profiled launch
    of that kernel, in order; profiled launches the log does not name (CuPy's own) are dropped."""
    matched, queue = [], list(profiled)
    for entry in logged:
        while queue and base_name(queue[0]["kernel"]) != base_name(entry["kernel"]):
            queue.pop(0)
        if not queue:
            raise ProfilerError(f"ncu profiled no launch of {entry['kernel']} for {entry['group']}: "
                                "the profile and the program's launches do not match")
        launch = queue.pop(0)
        matched.append({**entry, "profiled_kernel": launch["kernel"], "metrics": launch["metrics"]})
    return matched


def _run_ncu(ncu: str, metrics: Sequence[str], child_args: Sequence[str], timeout: float) -> tuple[list, list, list]:
    """Profile ``python -m pmpp.profiling.ncu <child_args>``: (matched launches, metrics used, metrics ncu refused)."""
    metrics, refused = list(metrics), []
    for _ in range(len(metrics)):
        command = [ncu, "--csv", "--print-units", "base", "--profile-from-start", "off",
                   "--metrics", ",".join(metrics), sys.executable, "-m", "pmpp.profiling.ncu", *child_args]
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        said = run.stdout + run.stderr
        unknown = [m for m in metrics if m in said] if run.returncode != 0 and "metric" in said.lower() else []
        if unknown:
            refused += unknown
            metrics = [m for m in metrics if m not in unknown]
            continue
        break
    logged = [json.loads(line[len(LAUNCH_LOG):]) for line in run.stdout.splitlines() if line.startswith(LAUNCH_LOG)]
    profiled = parse_csv(run.stdout)
    if run.returncode != 0 or not profiled:
        raise ProfilerError(f"ncu {' '.join(child_args[:2])} failed (exit {run.returncode}): "
                            f"{(run.stderr or run.stdout).strip()[-1500:]}")
    return match_launches(profiled, [e for batch in logged for e in batch]), metrics, refused


def profile_chapter(chapter, *, ncu: str | None = None, seed: int = SEED, variants: Sequence[str] | None = None,
                    metrics: Sequence[str] = METRICS, timeout: float = 580) -> dict:
    """Every variant of ``chapter`` at its CPU-engine problem under ncu: ``{"problem", "seed",
    "metrics", "refused", "variants": [{"variant", "launches": [...]}], "skipped": [...]}``."""
    ncu = ncu or find_ncu()
    problem = dict(chapter.problems["cpu"])
    names = [chapter.variant(v).name for v in variants] if variants else [v.name for v in chapter.variants]
    wanted = usable(metrics, available_metrics(ncu))
    args = ["chapter", chapter.name, json.dumps(problem), str(seed), *names]
    launches, used, refused = _run_ncu(ncu, wanted, args, timeout)
    rows = [{"variant": name, "launches": [_launch_row(l) for l in launches if l["group"] == name]} for name in names]
    skipped = [r["variant"] for r in rows if not r["launches"]]
    return {"problem": problem, "seed": seed, "metrics": used, "refused": refused,
            "variants": [r for r in rows if r["launches"]], "skipped": skipped}


def profile_cases(cases: Sequence[Mapping[str, Any]], kernel_file: str, *, ncu: str | None = None,
                  seed: int = SEED, metrics: Sequence[str] = METRICS, timeout: float = 580) -> dict:
    """The hand-counted kernels of ``kernel_file`` (cases as in ``tests/counter_cases.py``)."""
    ncu = ncu or find_ncu()
    wanted = usable(metrics, available_metrics(ncu))
    args = ["cases", str(Path(kernel_file).resolve()), json.dumps(list(cases)), str(seed)]
    launches, used, refused = _run_ncu(ncu, wanted, args, timeout)
    return {"file": Path(kernel_file).name, "seed": seed, "metrics": used, "refused": refused,
            "cases": [{"case": c["name"], "launches": [_launch_row(l) for l in launches if l["group"] == c["name"]]}
                      for c in cases]}


def _launch_row(launch: Mapping) -> dict:
    return {"kernel": launch["kernel"], "grid": launch["grid"], "block": launch["block"],
            "shared_mem": launch["shared_mem"], "metrics": launch["metrics"]}


# ---- the recording ----------------------------------------------------------------------------

def default_path(device: Mapping[str, Any] | None = None, commit: str | None = None) -> Path:
    """``results/counters/<device-slug>-<commit>.json``."""
    return recording_path("counters", device, commit)


def write_recording(path, key: str, profile: Mapping[str, Any], *, device=None, software=None, commit=None) -> Path:
    """Add one chapter's (or the cases') profile under ``key`` to a counters recording."""
    return add_to_recording(path, "counters", "profiles", key, profile, validate, device=device, software=software,
                            commit=commit)


def validate(data: Any, where: Any = "<counters>") -> None:
    """Raise ValueError unless ``data`` is a complete counters recording."""
    def bad(why):
        raise ValueError(f"{where}: {why}")
    if not isinstance(data, dict):
        bad("not a JSON object")
    for key in ("device", "versions", "date", "commit", "profiles"):
        if key not in data:
            bad(f"missing {key!r}")
    for key, profile in data["profiles"].items():
        groups = profile.get("variants", profile.get("cases"))
        if not groups:
            bad(f"{key}: nothing was profiled")
        for group in groups:
            if not group.get("launches"):
                bad(f"{key} {group.get('variant', group.get('case'))}: no launch")
            for launch in group["launches"]:
                if not isinstance(launch.get("metrics"), dict):
                    bad(f"{key} {group.get('variant', group.get('case'))}: a launch without metrics")


def recorded(key: str, directory=None) -> dict | None:
    """The newest committed recording that has ``key`` (a chapter, or "cases"), or None."""
    found = recordings_with("counters", "profiles", key, validate, directory)
    return found[0] if found else None


# ---- the child that ncu runs --------------------------------------------------------------------

class _LaunchLog:
    """Records the kernel launches the GPU backend makes while ``group`` is set."""

    def __init__(self):
        self.group, self.entries = None, []
        from ..backends.gpu import CupyModule
        original = CupyModule.launch
        log = self

        def launch(module, name, grid, block, shared_mem, args, arg_names=(), writable=()):
            if log.group is not None:
                log.entries.append({"group": log.group, "kernel": name, "grid": list(grid), "block": list(block),
                                    "shared_mem": int(shared_mem)})
            return original(module, name, grid, block, shared_mem, args, arg_names, writable)

        CupyModule.launch = launch

    def flush(self):
        print(LAUNCH_LOG + json.dumps(self.entries), flush=True)
        self.entries = []


def _profiled(log: _LaunchLog, group: str, run) -> None:
    """``run()`` once unprofiled (compiles, warms up), then once between profiler start and stop."""
    import cupy
    import cupyx.profiler
    run()
    cupy.cuda.Device().synchronize()
    log.group = group
    with cupyx.profiler.profile():
        run()
        cupy.cuda.Device().synchronize()
    log.group = None


def _child_chapter(name: str, problem_json: str, seed: str, *variants: str) -> None:
    import cupy
    import numpy as np
    from .. import chapters, runner
    chapter = chapters.get(name)
    log = _LaunchLog()
    base = json.loads(problem_json)
    for vname in variants:
        variant = chapter.variant(vname)
        problem = runner.problem_for(variant, base)
        if not variant.supports(problem, "cupy"):
            continue
        try:
            module = runner.load_variant(chapter, variant, backend="cupy")
            inputs = chapter.make_inputs(problem, cupy, np.random.default_rng(int(seed)))
            _profiled(log, variant.name, lambda: variant.launch(module, problem, inputs))
        except Exception as exc:     # record the others; the missing one is listed as skipped
            log.group = None
            log.entries = [e for e in log.entries if e["group"] != variant.name]
            print(f"{variant.name} failed: {exc}", file=sys.stderr, flush=True)
    log.flush()


def _child_cases(kernel_file: str, cases_json: str, seed: str) -> None:
    import cupy
    from ..loader import load
    log = _LaunchLog()
    module = load(source=Path(kernel_file).read_text(), filename=Path(kernel_file).name, backend="cupy")
    for case in json.loads(cases_json):
        args = case_arguments(case, cupy, int(seed))
        kernel = module.get_function(case["kernel"])
        _profiled(log, case["name"], lambda: kernel(tuple(case["grid"]), tuple(case["block"]), args,
                                                    shared_mem=case.get("shared_mem", 0)))
    log.flush()


def case_arguments(case: Mapping[str, Any], xp, seed: int) -> list:
    """A case's arguments: ``["random", dtype, size]`` (uniform in [0, 1), from ``seed``),
    ``["zeros", dtype, size]``, or ``["scalar", dtype, value]``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    args = []
    for kind, dtype, value in case["args"]:
        if kind == "scalar":
            args.append(np.dtype(dtype).type(value))
        elif kind == "zeros":
            args.append(xp.zeros(int(value), dtype=dtype))
        elif kind == "random":
            args.append(xp.asarray(rng.random(int(value)).astype(dtype)))
        else:
            raise ValueError(f"case {case['name']}: unknown argument kind {kind!r}")
    return args


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"chapter": _child_chapter, "cases": _child_cases}[mode](*rest)


def label(chapter: str) -> str:
    """Where the Nsight Compute numbers of ``chapter`` come from, for a figure's footer."""
    found = recorded(chapter)
    if found is None:
        return "no Nsight Compute recording"
    return (f"DRAM and GPU counters: Nsight Compute on {found['device']['name']}, {found['date'][:10]} "
            f"(commit {found['commit']})")


# ---------------------------------------------------------------------------------------------
# Where the time goes: Nsight Compute's speed-of-light, occupancy and warp-state figures

STALL_REASONS = ("long_scoreboard", "barrier", "short_scoreboard", "lg_throttle", "mio_throttle", "membar",
                 "drain", "wait", "math_pipe_throttle", "not_selected", "dispatch_stall", "no_instruction",
                 "branch_resolving", "sleeping", "tex_throttle", "imc_miss")
STALL_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",     # DRAM Throughput
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",       # Compute (SM) Throughput
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",      # L2 Cache Throughput
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",    # L1/TEX Cache Throughput
    "smsp__issue_active.avg.pct_of_peak_sustained_active",    # Issue Slots Busy
    "sm__maximum_warps_per_active_cycle_pct",                 # Theoretical Occupancy
    "sm__warps_active.avg.pct_of_peak_sustained_active",      # Achieved Occupancy
    "launch__registers_per_thread",
    "smsp__average_warp_latency_per_inst_issued.ratio",       # Warp Cycles Per Issued Instruction
    *(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS),
)


def stall_profile(chapter, problem: Mapping[str, Any], names: Sequence[str], *, ncu: str | None = None,
                  timeout: float = 600) -> list[dict]:
    """Profile one launch of each of ``names`` (variants or library routines of ``chapter``) on
    ``problem`` with :data:`STALL_METRICS` (those this ncu knows), clocks left as they are; return
    ``[{"name", "kernels": [{"kernel", "grid", "block", "metrics"}]}]``, a row per name."""
    from .. import runner
    from .profile import library_named
    ncu = ncu or find_ncu()
    metrics = usable(STALL_METRICS, available_metrics(ncu))
    rows = []
    for name in names:
        library = library_named(chapter, name)
        name = library.name if library else chapter.variant(name).name
        own = problem if library else runner.problem_for(chapter.variant(name), problem)
        command = [ncu, "--csv", "--print-units", "base", "--profile-from-start", "off", "--clock-control", "none",
                   "--metrics", ",".join(metrics), sys.executable, "-m", "pmpp.profiling.profile",
                   chapter.name, name, json.dumps(own)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        launches = parse_csv(run.stdout)
        if run.returncode != 0 or not launches:
            raise ProfilerError(f"profiling {chapter.name} {name} failed (exit {run.returncode}): "
                                f"{(run.stderr or run.stdout).strip()[-800:]}")
        rows.append({"name": name, "kernels": launches})
    return rows


def write_stalls(path, chapter: str, problem: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], **run) -> Path:
    """Add one chapter's :func:`stall_profile` to ``results/stalls/<device>-<commit>.json``."""
    entry = {"problem": dict(problem), "rows": [dict(r) for r in rows]}
    return add_to_recording(path, "stalls", "chapters", chapter, entry, validate_stalls, **run)


def validate_stalls(data: Any, where: Any = "<stalls>") -> None:
    """Raise ValueError unless ``data`` is a complete stall recording."""
    for key in ("device", "versions", "date", "commit", "chapters"):
        if key not in data:
            raise ValueError(f"{where}: missing {key!r}")
    for chapter, profile in data["chapters"].items():
        for row in profile.get("rows") or [None]:
            if not row or not row.get("kernels") or not all(k.get("metrics") for k in row["kernels"]):
                raise ValueError(f"{where}: {chapter} {row and row.get('name')}: no kernel was profiled")


def recorded_stalls(chapter: str, directory: str | os.PathLike | None = None) -> list[dict]:
    """Every committed stall recording that has ``chapter``, newest first."""
    return recordings_with("stalls", "chapters", chapter, validate_stalls, directory)
