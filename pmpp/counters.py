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

import os
import sys
import types

import html
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

SPACES = ("global", "shared", "constant", "code")
OPS = ("ld", "st", "atom", "block")
DEFAULT_GPU = "H100"

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
    site: int = 0                 # the code address (one source line can hold several accesses)

    @property
    def key(self) -> tuple:
        return (self.file, self.line, self.space, self.op, self.site)

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
            raise ValueError("only counts of the same access add up")
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
    site: int = 0                 # the code address

    @property
    def lanes(self) -> list[int]:
        return [lane for lane in range(32) if self.mask >> lane & 1]

    def sectors(self) -> dict[int, int]:
        """lane -> first 32-byte sector it touches (global; arrays start on a sector boundary)."""
        return {lane: self.offsets[lane] // 32 for lane in self.lanes}

    @property
    def ideal_sectors(self) -> int:
        """The fewest sectors the active lanes' bytes fit in: width x lanes / 32, rounded up."""
        return -(-max(self.width, 1) * len(self.lanes) // 32)

    def banks(self) -> dict[int, int]:
        """lane -> bank of the first 4-byte word it touches (shared)."""
        return {lane: (self.offsets[lane] // 4) % 32 for lane in self.lanes}

    def words(self) -> dict[int, set]:
        """bank -> the distinct 4-byte words the active lanes touch in it (shared)."""
        found: dict[int, set] = {}
        for lane in self.lanes:
            offset = self.offsets[lane]
            for word in range(offset // 4, (offset + max(self.width, 1) - 1) // 4 + 1):
                found.setdefault(word % 32, set()).add(word)
        return found

    @property
    def conflict_degree(self) -> int:
        """The most distinct words one bank must deliver: 1 without a conflict, n for an n-way one
        (over the whole warp; 8- and 16-byte accesses are served in parts, see the engine's README)."""
        return max((len(w) for w in self.words().values()), default=0)


@dataclass
class Counters(Mapping):
    """The counters of one launch, or of several added together (a multi-pass variant).

    A read-only mapping from metric names (:data:`METRICS`) to numbers; ``accesses`` has them per
    source line and kind of access, ``lines`` one row per line, ``samples`` the recorded accesses
    of one warp (for the diagrams), ``summary`` the launch-wide counts."""

    kernels: list = field(default_factory=list)     # [(name, grid, block, shared_mem)]
    accesses: list = field(default_factory=list)    # [Access]
    summary: dict = field(default_factory=dict)
    samples: Sequence = field(default_factory=list)  # [Sample], of the first launch
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

    def sample(self, line: int | str | None = None, *, space: str | None = None, op: str | None = None,
               k: int = 0, nth: int = 0, file: str | None = None) -> Sample:
        """The sampled warp's ``k``-th execution (over the launch: the k-th time round a loop) of an
        access at ``line`` (a number, or text the line contains), of ``space``/``op`` if given; where
        the line makes several such accesses, the ``nth`` in code order."""
        line = self.find(line) if isinstance(line, str) else line
        found = [s for s in self.samples
                 if (line is None or s.line == line) and (space is None or s.space == space)
                 and (op is None or s.op == op) and (file is None or s.file == file) and s.op != "block"]
        if not found:
            recorded = sorted({s.line for s in self.samples if s.op != "block"})
            where = (f"lines with one: {recorded}" if recorded else
                     "the sampled warp made none: pick one that runs with sample_warp=(block, warp)")
            raise KeyError(f"no recorded access{'' if line is None else f' at line {line}'}"
                           f"{'' if space is None else f' to {space} memory'}"
                           f"{'' if op is None else f' ({op})'}; {where}")
        first = found[0]
        sites = sorted({s.site for s in found if (s.file, s.line, s.space, s.op) == (first.file, first.line,
                                                                                      first.space, first.op)})
        if nth >= len(sites):
            raise KeyError(f"line {first.line} makes {len(sites)} {first.space} {first.op} access(es); nth={nth}")
        executions = [s for s in found if s.site == sites[nth]]
        picked = [s for s in executions if s.k == k]
        if not picked:
            raise KeyError(f"the sampled warp made this access {len(executions)} times; k={k} is past that")
        return picked[0]

    def line(self, which: int | str, file: str | None = None) -> dict:
        """The row of :attr:`lines` for a line (its number, or text it contains)."""
        number = self.find(which, file) if isinstance(which, str) else which
        for row in self.lines:
            if row["line"] == number and (file is None or row["file"] == file):
                return row
        raise KeyError(f"line {number} was not counted (it runs no code, or no launch reached it)")

    def find(self, text: str, file: str | None = None) -> int:
        """The number of the first source line that contains ``text`` (so that a notebook names a
        line by its code, not by a number that moves when the file is edited)."""
        for name, source in self.source.items():
            if file is not None and name != file:
                continue
            for number, line in enumerate(source.splitlines(), start=1):
                if text in line:
                    return number
        raise KeyError(f"no line contains {text!r}")

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

    def listing(self, file: str | None = None, *, lines: tuple | None = None) -> "Listing":
        """The kernel file, each line that accesses memory or branches annotated with its counts
        (:func:`annotate`); the worst lines marked with ``>>`` (highlighted in a notebook)."""
        return annotate(self, file, lines=lines)


def _sum(rows: Sequence[Access], name: str) -> int:
    return int(sum(getattr(r, name) for r in rows))


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def _line_row(file: str, line: int, rows: Sequence[Access], text: str) -> dict:
    """A line's counts: global requests and sectors, shared wavefronts and conflicts, lanes; and per
    kind of access (``"global.ld"``, ...) its requests, sectors or wavefronts per request."""
    def pick(space, ops=("ld", "st", "atom")):
        return [r for r in rows if r.space == space and r.op in ops]

    glob, shared, code = pick("global"), pick("shared"), pick("code", ("block",))
    memory = glob + shared + pick("constant")
    requests, sectors = _sum(glob, "executed"), _sum(glob, "sectors")
    ideal = sum(r.executed * r.ideal_sectors_per_request for r in glob)
    wavefronts, ideal_wf = _sum(shared, "wavefronts"), _sum(shared, "ideal_wavefronts")
    lanes_rows = memory or code
    per_kind: dict[str, list] = {}
    for r in sorted(memory, key=lambda r: r.site):
        per_kind.setdefault(f"{r.space}.{r.op}", []).append({
            "requests": r.executed, "width": r.width, "lanes": r.lanes_per_execution,
            "sectors_per_request": r.sectors_per_request, "ideal_sectors_per_request": r.ideal_sectors_per_request,
            "wavefronts_per_request": r.wavefronts / r.executed if r.executed else 0.0,
            "bank_conflict_degree": r.conflict_degree,
            "addresses_per_request": r.addresses / r.executed if r.executed else 0.0})
    return {
        "file": file, "line": line, "source": text,
        "kinds": " ".join(sorted(per_kind)),
        "per_kind": per_kind,
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


def _worst(row: Mapping[str, Any]) -> bool:
    """A line to look at: global sectors per request at least twice the ideal, a bank-conflict
    degree of 2 or more, or fewer than half the lanes active."""
    return bool((row["global_requests"] and row["sectors_per_request"] >= 2 * row["ideal_sectors_per_request"])
                or row["bank_conflict_degree"] >= 2 or (row["executed"] and row["active_lanes"] < 16))


def _kind_cell(row: Mapping[str, Any], space: str) -> str:
    """``"ld 1.0/4 8.0/4 st 4.0/4"``: for each access of ``space`` on the line, in code order,
    sectors per request against the ideal (global), or the bank-conflict degree (shared: wavefronts
    over the conflict-free ones, 1.0 without conflicts)."""
    parts = []
    for kind, sites in sorted(row["per_kind"].items()):
        if not kind.startswith(space + "."):
            continue
        if space == "global":
            values = [f"{k['sectors_per_request']:.1f}/{k['ideal_sectors_per_request']}" for k in sites]
        else:
            values = [f"{k['bank_conflict_degree']:.1f}" for k in sites]
        parts.append(kind.split(".")[1] + " " + " ".join(values))
    return " ".join(parts)


@dataclass
class Listing:
    """A kernel file with each counted line's numbers beside it (``print`` it, or let Jupyter show
    it as a table with the worst lines highlighted)."""

    file: str
    lines: list          # (number, source text, the line's row of Counters.lines or None)

    COLUMNS = ("sectors/request (global, /ideal)", "bank conflicts (shared, n-way)", "active lanes", "warps diverged")

    def _cells(self, row) -> tuple:
        if row is None:
            return ("", "", "", "")
        return (_kind_cell(row, "global"), _kind_cell(row, "shared"), f"{row['active_lanes']:.1f}",
                str(row["diverged_warps"]) if row["diverged_warps"] else "")

    def __str__(self) -> str:
        cells = [self._cells(row) for _, _, row in self.lines]
        widths = [max([len(h.split(" (")[0])] + [len(c[i]) for c in cells]) for i, h in enumerate(self.COLUMNS)]
        head = "   line  " + "  ".join(h.split(" (")[0].rjust(w) for h, w in zip(self.COLUMNS, widths)) + "  " + self.file
        out = [head]
        for (number, text, row), cell in zip(self.lines, cells):
            mark = ">>" if row is not None and _worst(row) else "  "
            out.append(f"{mark} {number:>5}  " + "  ".join(c.rjust(w) for c, w in zip(cell, widths)) + f"  {text}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in ("line", *self.COLUMNS, "source"))
        body = []
        for number, text, row in self.lines:
            style = " style='background:#fde2e1'" if row is not None and _worst(row) else ""
            cells = "".join(f"<td style='text-align:right;white-space:nowrap'>{html.escape(c)}</td>"
                            for c in self._cells(row))
            body.append(f"<tr{style}><td>{number}</td>{cells}<td style='text-align:left'>"
                        f"<pre style='margin:0'>{html.escape(text)}</pre></td></tr>")
        return (f"<p><code>{html.escape(self.file)}</code>, counted on pmpp's CPU engine; highlighted: sectors per "
                "request at least twice the ideal, a bank conflict, or fewer than half the lanes active</p>"
                f"<table><tr>{head}</tr>{''.join(body)}</table>")


def annotate(counters: Counters, file: str | None = None, *, lines: tuple | None = None) -> Listing:
    """The kernel file of ``counters`` (or ``file``) with each counted line's numbers; ``lines``
    = (first, last) keeps a part of it."""
    file = file or next((a.file for a in counters.accesses if a.file in counters.source), None)
    if file is None:
        raise ValueError("no counted line is in a file whose source is known")
    rows = {r["line"]: r for r in counters.lines if r["file"] == file}
    text = counters.source.get(file, "").splitlines()
    first, last = lines or (1, len(text))
    first, last = max(1, first), min(last, len(text))
    return Listing(file, [(n, text[n - 1].rstrip(), rows.get(n)) for n in range(first, last + 1)])


# ---- building Counters from what the engine sent -------------------------------------------------

def from_engine(raw: Mapping[str, Any], library, *, kernel: tuple, source: Mapping[str, str],
                gpu: str = DEFAULT_GPU, footprint: int = 0) -> Counters:
    """A :class:`Counters` from a count build's ``last_counts`` (see ``worker.py``): code addresses
    become source lines (counts of one line and kind are added up). The samples may come as a list
    of dicts or as the engine's array of ``pmpp_count_sample`` in bytes. ``footprint``: the bytes
    of the arrays the launch was given (what it can move through DRAM at least once, at most)."""
    samples = raw["samples"]
    packed = isinstance(samples, bytes)
    sample_pcs = _sample_array(samples)["pc"].tolist() if packed else [s["pc"] for s in samples]
    where = _source_lines(library, [r["pc"] for r in raw["rows"]] + sample_pcs)
    accesses: dict[tuple, Access] = {}
    for r in raw["rows"]:
        file, line = where.get(r["pc"]) or ("?", 0)
        a = Access(file, line, SPACES[r["space"]], OPS[r["op"]], r["width"], r["executed"], r["threads"],
                   r["partial"], r["diverged_warps"], r["sectors"], r["wavefronts"], r["ideal_wavefronts"],
                   r["addresses"], r["max_same_address"], r["pc"])
        accesses[a.key] = accesses[a.key] + a if a.key in accesses else a
    summary = {k: v for k, v in raw["summary"].items() if k not in ("nrows", "nsamples")}
    requested = 32 * sum(a.sectors for a in accesses.values() if a.space == "global")
    summary["footprint_bytes"] = footprint
    summary["dram_bytes_estimate"] = min(requested, footprint) if footprint else requested
    return Counters([kernel], list(accesses.values()), summary, _Samples(samples, len(sample_pcs), where),
                    dict(source), gpu)


class _Samples(Sequence):
    """:attr:`Counters.samples` of a counted launch, made into :class:`Sample` objects (in file,
    line and execution order) when first looked at: most counted runs never look at them, and
    making them all would cost more than a small launch."""

    def __init__(self, raw: list | bytes, count: int, where: Mapping[int, tuple | None]):
        self._raw, self._count, self._where, self._made = raw, count, where, None

    def _list(self) -> list[Sample]:
        if self._made is None:
            records = _sample_dicts(self._raw) if isinstance(self._raw, bytes) else self._raw
            made = [_sample(s, self._where) for s in records]
            made.sort(key=lambda s: (s.file, s.line, s.space, s.op, s.site, s.k))
            self._made, self._raw, self._where = made, None, None
        return self._made

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return repr(self._list())


def _sample_array(data: bytes):
    import numpy as np
    from .backends.cpu.worker import CountSample
    return np.frombuffer(data, np.dtype(CountSample))


def _sample_dicts(data: bytes) -> list[dict]:
    """The engine's ``pmpp_count_sample`` records as the dicts ``worker.py`` makes of them."""
    a = _sample_array(data)
    columns = {name: a[name].tolist() for name in a.dtype.names if name != "array"}
    names = a["array"].view(f"S{a.dtype['array'].itemsize}").ravel().tolist()
    columns["array"] = [name.split(b"\0")[0].decode(errors="replace") for name in names]
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def _sample(s: Mapping[str, Any], where: Mapping[int, tuple]) -> Sample:
    file, line = where.get(s["pc"]) or ("?", 0)
    mask, offset = s["mask"], s["offset"]
    offsets = tuple(offset) if mask == 0xFFFFFFFF else \
        tuple(o if mask >> lane & 1 else None for lane, o in enumerate(offset))
    return Sample(file, line, SPACES[s["space"]], OPS[s["op"]], s["k"], mask, s["width"], s["array"],
                  s["array_offset"], offsets, s["pc"])


# library -> {code offset: (file, line), or None where it has none}: a count build's code does not
# change, so each code offset is looked up once (lines.py reads the module's debug information).
_lines_of: dict[tuple, dict[int, tuple | None]] = {}


def _source_lines(library, offsets: Iterable[int]) -> dict[int, tuple | None]:
    from .backends.cpu.diagnostics import source_locations
    try:
        st = os.stat(library)
        key = (str(library), st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        key = (str(library),)
    known = _lines_of.setdefault(key, {})
    missing = {int(o) for o in offsets} - known.keys()
    if missing:
        found = source_locations(library, missing)
        known.update({o: found.get(o) for o in missing})
    return known


def counters(kernel, grid, block, args, shared_mem=0, *, gpu: str = DEFAULT_GPU,
             sample_warp: tuple = (0, 0), serial: bool = False) -> Counters:
    """Launch ``kernel`` (a :class:`pmpp.Function`) once on the CPU engine, counting, and return
    its :class:`Counters`. Arguments are as for calling the kernel; CuPy arrays are copied to the
    host and back. ``sample_warp`` = (block, warp) picks the warp whose accesses are kept for
    the diagrams (linear block index, warp index in the block). ``gpu`` is the GPU the launch is
    costed for (its SM count is what the module reports, for code that sizes grids from it).
    ``serial=True`` runs the blocks one after another on one thread: a block that waits for an
    earlier one (a look-back) finds it done, so that its polls count the same on every run."""
    from .loader import Function
    if not isinstance(kernel, Function):
        raise TypeError("pmpp.counters takes a kernel from pmpp.load(...).get_function(name), "
                        f"not {type(kernel).__name__}")
    twin = counting_module(kernel.module, gpu=gpu, sample_warp=sample_warp, serial=serial)
    host_args, copy_back = _host_arguments(args)
    twin.get_function(kernel.name)(grid, block, host_args, shared_mem=shared_mem)
    for device, host in copy_back:
        device.set(host)
    return twin.last_counters


def counted_run(module, launch) -> "Counters":
    """The counters of one run of a count build ``module``: ``launch()`` makes its launches, which
    are added up. Raises ValueError if it launched no kernel."""
    module.launches.clear()
    launch()
    if not module.launches:
        raise ValueError("launched no kernel")
    total = module.launches[0]
    for more in module.launches[1:]:
        total = total + more
    return total


def counting_module(module, *, gpu: str = DEFAULT_GPU, sample_warp: tuple = (0, 0), timeout=None,
                    collect: bool = True, serial: bool = False):
    """The count build of a loaded :class:`pmpp.Module` (the same file, options and defines): a
    module whose every launch leaves its counters in ``last_counters`` and appends them to
    ``launches``, its grids sized for ``gpu``'s SMs. ``timeout``: seconds a launch may take (as
    :func:`pmpp.load`'s). ``collect=False``: the instrumented code runs, counting nothing.
    ``serial=True``: the blocks run one after another on one thread (the same counts on every run
    where blocks wait for one another)."""
    from .loader import CountSession, load
    built = load(source=module.source, filename=module.filename, backend="cpu", options=module.options,
                 defines=module.defines, name_expressions=module.name_expressions, count=True,
                 timeout=timeout, strict=module.strict, directory=module.directory)
    session = CountSession(gpu=gpu, sample_warp=tuple(int(v) for v in sample_warp), collect=collect, serial=serial)
    return built.view(counting=session, sm_count=_sm_count(gpu))


def _sm_count(gpu: str) -> int:
    from .occupancy import gpu_spec
    return int(gpu_spec(gpu).sm_count)


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


class _CallableModule(types.ModuleType):
    """``pmpp.counters(...)`` calls :func:`counters`; ``pmpp.counters.<name>`` is the rest of the module."""

    def __call__(self, *args, **kwargs):
        return counters(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
