"""Why a kernel is fast, without a GPU: Nsight Compute's counters, counted by the CPU engine.

    c = pmpp.counters(kernel, grid, block, (x, out, np.uint32(n)))
    c["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]        # a number, named as ncu names it
    c.lines                                                   # the same, per .cu source line
    print(c.listing())                                        # the kernel, each line annotated

The launch runs on the CPU engine from a *count build* of the kernel's file: every load, store
and atomic reaches the runtime with its address and code address, and every basic block with the
lane that runs it. The runtime puts the accesses of the 32 lanes of a warp back together into
warp instructions (lanes run one after another there) and costs each as the GPU's load/store unit
does: 32-byte sectors for global memory, wavefronts and bank conflicts for shared memory, active
lanes for control divergence. What each metric means, and where it can differ from Nsight
Compute on a real GPU, is in :data:`METRICS` and in ``pmpp/backends/cpu/README.md``.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

SPACES = ("global", "shared", "constant", "code")
OPS = ("ld", "st", "atom", "block")
DEFAULT_GPU = "H100"
SM_COUNT = {"H100": 132}   # what a count build reports as the device's SM count (grid sizing)

# name -> what it counts. Names with a prefix other than engine__ are Nsight Compute's.
METRICS = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "warp-level global load instructions executed",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "32-byte sectors those loads touched",
    "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio": "sectors per global load request",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum": "bytes requested at L1 by global loads (sectors x 32)",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "warp-level global store instructions executed",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "32-byte sectors those stores touched",
    "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio": "sectors per global store request",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum": "bytes requested at L1 by global stores (sectors x 32)",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum":
        "warp-level global atomics executed (ncu splits them: op_atom when the old value is used, "
        "op_red when not)",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum": "32-byte sectors those atomics touched",
    "smsp__sass_inst_executed_op_shared_ld.sum": "warp-level shared-memory load instructions executed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "wavefronts (passes over the 32 banks) of shared loads",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "wavefronts beyond the conflict-free ones, loads",
    "smsp__sass_inst_executed_op_shared_st.sum": "warp-level shared-memory store instructions executed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "wavefronts of shared stores",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "wavefronts beyond the conflict-free ones, stores",
    "smsp__sass_inst_executed_op_shared_atom.sum": "warp-level shared-memory atomics executed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum": "wavefronts of shared-memory atomics",
    "smsp__thread_inst_executed_per_inst_executed.ratio":
        "active threads per executed warp instruction (here: per warp-level basic block executed)",
    "engine__basic_blocks_executed.sum":
        "warp-level basic blocks executed (ncu's smsp__inst_executed.sum counts the SASS instructions "
        "in them, several per block)",
    "engine__barriers_executed.sum": "warp-level __syncthreads() executed (each warp of the block, once)",
    "engine__atomics.sum": "atomic operations (one per lane that takes part)",
    "engine__atomic_lanes_per_address.ratio":
        "lanes per distinct address in a warp's atomic instruction (1: no contention within the warp)",
    "engine__atomic_max_updates_per_address":
        "most atomic updates of one global address over the launch (contention between warps and blocks)",
    "engine__atomic_shared_max_updates_per_address":
        "most atomic updates of one shared-memory address within a block",
    "engine__constant_requests.sum": "warp-level loads from __constant__ memory executed",
    "engine__constant_addresses_per_request.ratio":
        "distinct addresses per __constant__ load (the constant cache serves one address per pass)",
    "engine__blocks.sum": "thread blocks launched",
    "engine__warps.sum": "warps launched",
}

# What one warp instruction of each access width ideally touches: 32 lanes x width bytes.
IDEAL_SECTORS = {1: 1, 2: 2, 4: 4, 8: 8, 16: 16}


@dataclass(frozen=True)
class Access:
    """The counts of one kind of access (or of the basic blocks) on one source line."""

    file: str
    line: int
    space: str                    # "global", "shared", "constant" or "code" (basic blocks)
    op: str                       # "ld", "st", "atom" or "block"
    width: int                    # bytes per lane
    executed: int                 # warp-level executions: requests, instructions
    threads: int                  # active lanes, summed over executions
    partial: int = 0              # executions with some lanes of the warp idle
    diverged_warps: int = 0       # warps with such an execution here
    sectors: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0
    addresses: int = 0
    max_same_address: int = 0

    @property
    def key(self) -> tuple:
        return (self.file, self.line, self.space, self.op)

    @property
    def lanes_per_execution(self) -> float:
        return self.threads / self.executed if self.executed else 0.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.executed if self.executed else 0.0

    @property
    def ideal_sectors_per_request(self) -> int:
        return IDEAL_SECTORS.get(self.width, max(1, self.width))

    @property
    def bank_conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts

    @property
    def conflict_degree(self) -> float:
        """Wavefronts per conflict-free wavefront: 1 without conflicts, 32 for a 32-way conflict."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 0.0

    def __add__(self, other: "Access") -> "Access":
        if other.key != self.key:
            raise ValueError("only counts of the same line and kind add up")
        total = {f: getattr(self, f) + getattr(other, f) for f in
                 ("executed", "threads", "partial", "diverged_warps", "sectors", "wavefronts",
                  "ideal_wavefronts", "addresses")}
        return replace(self, width=max(self.width, other.width),
                       max_same_address=max(self.max_same_address, other.max_same_address), **total)


@dataclass(frozen=True)
class Sample:
    """One real warp instruction of the sampled warp: which lanes took part and what each touched.
    ``offsets`` are bytes from the start of ``array`` (global) or of shared memory (shared)."""

    file: str
    line: int
    space: str
    op: str
    k: int                        # the warp's k-th execution of this access
    mask: int
    width: int
    array: str                    # argument or __shared__ array of the first active lane
    array_offset: int             # shared: where that array starts in shared memory
    offsets: tuple                # per lane (None where the lane took no part)

    @property
    def lanes(self) -> list[int]:
        return [lane for lane in range(32) if self.mask >> lane & 1]

    def sectors(self) -> dict[int, int]:
        """lane -> first 32-byte sector it touches (global; arrays start on a sector boundary)."""
        return {lane: self.offsets[lane] // 32 for lane in self.lanes}

    def banks(self) -> dict[int, int]:
        """lane -> bank of the first 4-byte word it touches (shared)."""
        return {lane: (self.offsets[lane] // 4) % 32 for lane in self.lanes}


@dataclass
class Counters(Mapping):
    """The counters of one launch, or of several added together (a multi-pass variant).

    A read-only mapping from metric names (:data:`METRICS`) to numbers; ``accesses`` has them per
    source line and kind of access, ``lines`` one row per line, ``samples`` the recorded accesses
    of one warp (for the diagrams), ``summary`` the launch-wide counts."""

    kernels: list = field(default_factory=list)     # [(name, grid, block, shared_mem)]
    accesses: list = field(default_factory=list)    # [Access]
    summary: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)     # [Sample], of the first launch
    source: dict = field(default_factory=dict)      # file -> its text (for listings)
    gpu: str = DEFAULT_GPU

    # ---- the mapping ------------------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        metrics = self.metrics()
        if name not in metrics:
            raise KeyError(f"no counter {name!r}; the counters are: {', '.join(metrics)}")
        return metrics[name]

    def __iter__(self):
        return iter(self.metrics())

    def __len__(self) -> int:
        return len(METRICS)

    def metrics(self) -> dict[str, float]:
        """Every counter of :data:`METRICS`, computed from the per-line counts."""
        m: dict[str, float] = {}
        for op in ("ld", "st", "atom"):
            rows = self._select("global", op)
            requests, sectors = _sum(rows, "executed"), _sum(rows, "sectors")
            m[f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"] = requests
            m[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"] = sectors
            if op != "atom":
                m[f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{op}.ratio"] = _ratio(sectors, requests)
                m[f"l1tex__t_bytes_pipe_lsu_mem_global_op_{op}.sum"] = 32 * sectors
        for op in ("ld", "st"):
            rows = self._select("shared", op)
            wavefronts = _sum(rows, "wavefronts")
            m[f"smsp__sass_inst_executed_op_shared_{op}.sum"] = _sum(rows, "executed")
            m[f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"] = wavefronts
            m[f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"] = wavefronts - _sum(rows, "ideal_wavefronts")
        m["smsp__sass_inst_executed_op_shared_atom.sum"] = _sum(self._select("shared", "atom"), "executed")
        m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum"] = _sum(self._select("shared", "atom"), "wavefronts")
        blocks = self._select("code", "block")
        m["smsp__thread_inst_executed_per_inst_executed.ratio"] = _ratio(_sum(blocks, "threads"), _sum(blocks, "executed"))
        m["engine__basic_blocks_executed.sum"] = _sum(blocks, "executed")
        m["engine__barriers_executed.sum"] = self.summary.get("barriers", 0)
        atomics = [a for a in self.accesses if a.op == "atom"]
        m["engine__atomics.sum"] = _sum(atomics, "threads")
        m["engine__atomic_lanes_per_address.ratio"] = _ratio(_sum(atomics, "threads"), _sum(atomics, "addresses"))
        m["engine__atomic_max_updates_per_address"] = self.summary.get("atom_global_max_updates", 0)
        m["engine__atomic_shared_max_updates_per_address"] = self.summary.get("atom_shared_max_updates", 0)
        constant = self._select("constant", "ld")
        m["engine__constant_requests.sum"] = _sum(constant, "executed")
        m["engine__constant_addresses_per_request.ratio"] = _ratio(_sum(constant, "addresses"), _sum(constant, "executed"))
        m["engine__blocks.sum"] = self.summary.get("blocks", 0)
        m["engine__warps.sum"] = self.summary.get("warps", 0)
        return m

    def _select(self, space: str, op: str) -> list[Access]:
        return [a for a in self.accesses if a.space == space and a.op == op]

    # ---- derived views --------------------------------------------------------------------------
    @property
    def requested_bytes(self) -> float:
        """Bytes requested at L1 by global loads, stores and atomics: sectors x 32."""
        return 32.0 * sum(a.sectors for a in self.accesses if a.space == "global")

    @property
    def lines(self) -> list[dict]:
        """One row per source line that accesses memory or runs code, in file order."""
        by_line: dict[tuple, list[Access]] = {}
        for a in self.accesses:
            by_line.setdefault((a.file, a.line), []).append(a)
        return [_line_row(file, line, rows, self._text(file, line)) for (file, line), rows in sorted(by_line.items())]

    def _text(self, file: str, line: int) -> str:
        text = self.source.get(file)
        if text is None:
            return ""
        lines = text.splitlines()
        return lines[line - 1].rstrip() if 0 < line <= len(lines) else ""

    def sample(self, line: int | None = None, *, space: str | None = None, op: str | None = None,
               k: int = 0, file: str | None = None) -> Sample:
        """The recorded execution of the sampled warp at ``line`` (the first access there of
        ``space``/``op`` if given), its ``k``-th execution (k-th loop iteration since the last
        barrier, for a line in a loop)."""
        found = [s for s in self.samples
                 if (line is None or s.line == line) and (space is None or s.space == space)
                 and (op is None or s.op == op) and (file is None or s.file == file) and s.op != "block"]
        if not found:
            raise KeyError(f"no recorded access{'' if line is None else f' at line {line}'}"
                           f"{'' if space is None else f' to {space} memory'}"
                           f"{'' if op is None else f' ({op})'}; lines with one: "
                           f"{sorted({s.line for s in self.samples if s.op != 'block'})}")
        executions = [s for s in found if (s.file, s.line, s.space, s.op) == (found[0].file, found[0].line,
                                                                               found[0].space, found[0].op)]
        picked = [s for s in executions if s.k == k]
        if not picked:
            raise KeyError(f"the sampled warp executed line {found[0].line} {len(executions)} times; k={k} is "
                           f"past that")
        return picked[0]

    def __add__(self, other: "Counters") -> "Counters":
        merged: dict[tuple, Access] = {}
        for a in [*self.accesses, *other.accesses]:
            merged[a.key] = merged[a.key] + a if a.key in merged else a
        summary = {k: (max if "max" in k else (lambda x, y: x + y))(self.summary.get(k, 0), other.summary.get(k, 0))
                   for k in {*self.summary, *other.summary}}
        return Counters(self.kernels + other.kernels, list(merged.values()), summary,
                        self.samples or other.samples, {**other.source, **self.source}, self.gpu)

    # ---- display ----------------------------------------------------------------------------
    def table(self, names: Iterable[str] | None = None) -> str:
        """The counters as aligned text, one per line."""
        metrics = self.metrics()
        chosen = list(names) if names is not None else list(metrics)
        width = max(len(n) for n in chosen)
        return "\n".join(f"{n:<{width}}  {_fmt(metrics[n])}" for n in chosen)

    def _repr_html_(self) -> str:
        metrics = self.metrics()
        rows = "".join(f"<tr><td><code>{html.escape(n)}</code></td><td style='text-align:right'>{_fmt(v)}</td>"
                       f"<td>{html.escape(METRICS[n])}</td></tr>" for n, v in metrics.items() if v)
        head = ", ".join(f"{name} grid {grid} block {block}" for name, grid, block, _ in self.kernels[:3])
        more = f" and {len(self.kernels) - 3} more launches" if len(self.kernels) > 3 else ""
        return (f"<p>Counted on pmpp's CPU engine: {html.escape(head + more)} (counters that are 0 left out)</p>"
                f"<table><tr><th>counter</th><th>value</th><th>what it counts</th></tr>{rows}</table>")

    def __repr__(self) -> str:
        names = ", ".join(sorted({k[0] for k in self.kernels}))
        return f"<pmpp.Counters of {names}: {len(self.kernels)} launch(es), {len(self.lines)} lines>"

    def listing(self, file: str | None = None) -> str:
        """The kernel file, each line that accesses memory or branches annotated with its counts
        (see :func:`annotate`); the worst lines marked with ``>>``."""
        return annotate(self, file)


def _sum(rows: Sequence[Access], name: str) -> int:
    return int(sum(getattr(r, name) for r in rows))


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def _line_row(file: str, line: int, rows: Sequence[Access], text: str) -> dict:
    """A line's counts: global requests and sectors, shared wavefronts and conflicts, lanes."""
    def pick(space, ops=("ld", "st", "atom")):
        return [r for r in rows if r.space == space and r.op in ops]

    glob, shared, code = pick("global"), pick("shared"), pick("code", ("block",))
    memory = glob + shared + pick("constant")
    requests, sectors = _sum(glob, "executed"), _sum(glob, "sectors")
    ideal = sum(r.executed * r.ideal_sectors_per_request for r in glob)
    wavefronts, ideal_wf = _sum(shared, "wavefronts"), _sum(shared, "ideal_wavefronts")
    lanes_rows = memory or code
    return {
        "file": file, "line": line, "source": text,
        "kinds": " ".join(sorted({f"{r.space}.{r.op}" for r in memory})),
        "global_requests": requests,
        "sectors_per_request": _ratio(sectors, requests),
        "ideal_sectors_per_request": _ratio(ideal, requests),
        "shared_requests": _sum(shared, "executed"),
        "wavefronts_per_request": _ratio(wavefronts, _sum(shared, "executed")),
        "bank_conflict_degree": _ratio(wavefronts, ideal_wf),
        "bank_conflicts": wavefronts - ideal_wf,
        "active_lanes": _ratio(_sum(lanes_rows, "threads"), _sum(lanes_rows, "executed")),
        "diverged_warps": max([r.diverged_warps for r in code] or [0]),
        "executed": max([r.executed for r in lanes_rows] or [0]),
    }


def annotate(counters: Counters, file: str | None = None) -> str:
    """A kernel listing with, for each counted line: sectors per request (global, against the
    ideal for the width), wavefronts per request (shared: the bank-conflict degree), and active
    lanes per executed warp instruction. Lines far from their ideal are marked ``>>``."""
    file = file or (counters.accesses[0].file if counters.accesses else None)
    text = counters.source.get(file, "")
    rows = {r["line"]: r for r in counters.lines if r["file"] == file}
    out = [f"{'':2} {'line':>4}  {'sect/req':>9} {'wavef/req':>9} {'lanes':>5}  source ({file})"]
    for number, src in enumerate(text.splitlines(), start=1):
        r = rows.get(number)
        if r is None:
            out.append(f"{'':2} {number:>4}  {'':>9} {'':>9} {'':>5}  {src}")
            continue
        sect = f"{r['sectors_per_request']:.1f}/{r['ideal_sectors_per_request']:.0f}" if r["global_requests"] else ""
        wave = f"{r['wavefronts_per_request']:.1f}" if r["shared_requests"] else ""
        mark = ">>" if _worst(r) else ""
        out.append(f"{mark:2} {number:>4}  {sect:>9} {wave:>9} {r['active_lanes']:>5.1f}  {src}")
    return "\n".join(out)


def _worst(row: Mapping[str, Any]) -> bool:
    """A line to look at: global sectors per request at least twice the ideal, a bank-conflict
    degree of 2 or more, or fewer than half the lanes active."""
    return ((row["global_requests"] and row["sectors_per_request"] >= 2 * row["ideal_sectors_per_request"])
            or row["bank_conflict_degree"] >= 2 or (row["executed"] and row["active_lanes"] < 16))


# ---- building Counters from what the engine sent -------------------------------------------------

def from_engine(raw: Mapping[str, Any], library, *, kernel: tuple, source: Mapping[str, str],
                gpu: str = DEFAULT_GPU) -> Counters:
    """A :class:`Counters` from a count build's ``last_counts`` (see ``worker.py``): code addresses
    become source lines (counts of one line and kind are added up)."""
    from .backends.cpu.toolchain import source_locations
    offsets = [r["pc"] for r in raw["rows"]] + [s["pc"] for s in raw["samples"]]
    where = source_locations(library, offsets)
    accesses: dict[tuple, Access] = {}
    for r in raw["rows"]:
        file, line = where.get(r["pc"], ("?", 0))
        a = Access(file, line, SPACES[r["space"]], OPS[r["op"]], r["width"], r["executed"], r["threads"],
                   r["partial"], r["diverged_warps"], r["sectors"], r["wavefronts"], r["ideal_wavefronts"],
                   r["addresses"], r["max_same_address"])
        accesses[a.key] = accesses[a.key] + a if a.key in accesses else a
    samples = []
    for s in raw["samples"]:
        file, line = where.get(s["pc"], ("?", 0))
        offsets = tuple(s["offset"][lane] if s["mask"] >> lane & 1 else None for lane in range(32))
        samples.append(Sample(file, line, SPACES[s["space"]], OPS[s["op"]], s["k"], s["mask"], s["width"],
                              s["array"], s["array_offset"], offsets))
    samples.sort(key=lambda s: (s.file, s.line, s.space, s.op, s.k))
    summary = {k: v for k, v in raw["summary"].items() if k not in ("nrows", "nsamples")}
    return Counters([kernel], list(accesses.values()), summary, samples, dict(source), gpu)


def counters(kernel, grid, block, args, shared_mem=0, *, gpu: str = DEFAULT_GPU,
             sample_warp: tuple = (0, 0)) -> Counters:
    """Launch ``kernel`` (a :class:`pmpp.Function`) once on the CPU engine, counting, and return
    its :class:`Counters`. Arguments are as for calling the kernel; CuPy arrays are copied to the
    host and back. ``sample_warp`` = (block, warp) picks the warp whose accesses are kept for
    the diagrams (linear block index, warp index in the block). ``gpu`` is the GPU the launch is
    costed for (its SM count is what the module reports, for code that sizes grids from it)."""
    from .loader import Function
    if not isinstance(kernel, Function):
        raise TypeError("pmpp.counters takes a kernel from pmpp.load(...).get_function(name), "
                        f"not {type(kernel).__name__}")
    twin = counting_module(kernel.module, gpu=gpu, sample_warp=sample_warp)
    host_args, copy_back = _host_arguments(args)
    twin.get_function(kernel.name)(grid, block, host_args, shared_mem=shared_mem)
    for device, host in copy_back:
        device.set(host)
    return twin.last_counters


def counting_module(module, *, gpu: str = DEFAULT_GPU, sample_warp: tuple = (0, 0)):
    """The count build of a loaded :class:`pmpp.Module` (the same file, options and defines): a
    module whose every launch leaves its counters in ``last_counters`` and appends them to
    ``launches``."""
    from .loader import load
    twin = load(source=module.source, filename=module.filename, backend="cpu", options=module.options,
                defines=module.defines, name_expressions=module.name_expressions, count=True)
    twin._impl.sample_warp = tuple(int(v) for v in sample_warp)
    twin._impl.sm_count = _sm_count(gpu)
    twin._impl.counted_gpu = gpu
    return twin


def _sm_count(gpu: str) -> int:
    try:
        from .occupancy import gpu_spec
        return int(gpu_spec(gpu).sm_count)
    except (ImportError, AttributeError):
        if gpu not in SM_COUNT:
            raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(SM_COUNT)}") from None
        return SM_COUNT[gpu]


def _host_arguments(args):
    host, copy_back = [], []
    for a in args:
        if type(a).__module__.split(".")[0] == "cupy":
            h = a.get()
            host.append(h)
            copy_back.append((a, h))
        else:
            host.append(a)
    return host, copy_back

