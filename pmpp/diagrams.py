"""Pictures of one real warp instruction of a real kernel, drawn from the accesses the CPU engine
recorded (:attr:`pmpp.Counters.samples`): which lane touched which 32-byte sector (coalescing),
which lane hit which shared-memory bank (bank conflicts), and which lanes ran a line (divergence).

    c = pmpp.counters(kernel, grid, block, args)
    diagrams.coalescing(c.sample(line=12))           # lanes -> sectors of one global load
    diagrams.banks(c.sample(space="shared", k=1))    # lanes -> banks, the second time round a loop
    diagrams.active_lanes(c, line=9)                  # the sampled warp's lanes, execution by execution

Every function returns a matplotlib Figure titled with what it shows and its count.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from .counters import Counters, Sample

LANE_COLOR = "tab:blue"
IDLE_COLOR = "0.85"
CONFLICT_COLOR = "tab:red"
GOOD_COLOR = "tab:green"
LABEL_SIZE = 9


def _key(fig, entries: Sequence[tuple[str, str]]) -> None:
    """What each colour means, in a row under the picture."""
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=color, label=text) for color, text in entries], loc="outside lower center",
               ncols=min(len(entries), 2), fontsize=LABEL_SIZE, frameon=False)


def _bare(ax) -> None:
    ax.set_yticks([])
    ax.tick_params(axis="x", labelsize=LABEL_SIZE + 1, length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)


def _lane_column(ax, lanes: Sequence[int], x: float) -> None:
    for lane in range(32):
        active = lane in lanes
        ax.add_patch(_box(x, lane, LANE_COLOR if active else IDLE_COLOR))
        ax.text(x - 0.08, lane, str(lane), ha="right", va="center", fontsize=LABEL_SIZE, color="0.3")


def _box(x: float, y: float, color: str, width: float = 0.12, height: float = 0.8):
    from matplotlib.patches import Rectangle
    return Rectangle((x - width / 2, y - height / 2), width, height, color=color)


def _where(sample: Sample) -> str:
    return f"{sample.file}:{sample.line}"


def coalescing(sample: Sample, *, title: str | None = None) -> Figure:
    """Lane -> byte offset -> 32-byte sector for one global-memory instruction: the fewer distinct
    sectors, the fewer bytes the warp pulls through L1 (ideal: the width times 32 lanes / 32)."""
    if sample.space != "global":
        raise ValueError(f"coalescing draws a global-memory access; this one is {sample.space} "
                         "(for shared memory: diagrams.banks)")
    used = sorted({s for lane in sample.lanes for s in _sectors_of(sample, lane)})
    step = 32 / max(len(used), 1)
    row_of = {s: i * step for i, s in enumerate(used)}
    ideal = sample.ideal_sectors
    fig = Figure(figsize=(6.4, 7.6), layout="constrained")
    ax = fig.subplots()
    _lane_column(ax, sample.lanes, 0.0)
    height = min(32 / max(len(used), 1), 3.0)
    for s in used:
        ax.add_patch(_box(1.0, row_of[s] + height / 2 - 0.5, GOOD_COLOR if len(used) <= ideal else CONFLICT_COLOR,
                          width=0.14, height=height * 0.9))
        ax.text(1.1, row_of[s] + height / 2 - 0.5, f"sector {s} (bytes {32 * s}-{32 * s + 31})",
                va="center", fontsize=LABEL_SIZE)
    for lane in sample.lanes:
        for s in _sectors_of(sample, lane):
            ax.plot([0.06, 0.93], [lane, row_of[s] + height / 2 - 0.5], color=LANE_COLOR, linewidth=0.7, alpha=0.7)
    ax.set_xlim(-0.25, 2.0)
    ax.set_ylim(32, -1)
    ax.set_xticks([0, 1], ["lane", f"32-byte sectors of '{sample.array}'"])
    _bare(ax)
    ax.set_title(title or f"{_where(sample)}: {len(sample.lanes)} lanes x {sample.width} B touch "
                          f"{len(used)} sectors (ideal {ideal})", fontsize=11)
    _key(fig, [(LANE_COLOR, "lane that takes part"), (IDLE_COLOR, "lane that does not"),
               (GOOD_COLOR if len(used) <= ideal else CONFLICT_COLOR,
                "sector fetched (green: as few as the bytes need; red: more)")])
    return fig


def _sectors_of(sample: Sample, lane: int) -> range:
    offset = sample.offsets[lane]
    return range(offset // 32, (offset + max(sample.width, 1) - 1) // 32 + 1)


def banks(sample: Sample, *, title: str | None = None) -> Figure:
    """Lane -> shared-memory bank for one shared-memory instruction: lanes on different words of
    one bank are served one after another (a conflict: red); lanes on the same word share it."""
    if sample.space != "shared":
        raise ValueError(f"banks draws a shared-memory access; this one is {sample.space} "
                         "(for global memory: diagrams.coalescing)")
    words = sample.words()
    degree = sample.conflict_degree
    fig = Figure(figsize=(6.0, 7.6), layout="constrained")
    ax = fig.subplots()
    _lane_column(ax, sample.lanes, 0.0)
    for bank in range(32):
        n = len(words.get(bank, ()))
        color = IDLE_COLOR if n == 0 else (CONFLICT_COLOR if n > 1 else GOOD_COLOR)
        ax.add_patch(_box(1.0, bank, color, width=0.14))
        label = f"bank {bank}" + (f": {n} words" if n > 1 else "")
        ax.text(1.1, bank, label, va="center", fontsize=LABEL_SIZE, color=CONFLICT_COLOR if n > 1 else "0.3")
    for lane in sample.lanes:
        for word in _words_of(sample, lane):
            conflicted = len(words[word % 32]) > 1
            ax.plot([0.06, 0.93], [lane, word % 32], linewidth=0.8, alpha=0.8,
                    color=CONFLICT_COLOR if conflicted else LANE_COLOR)
    ax.set_xlim(-0.25, 1.75)
    ax.set_ylim(32, -1)
    ax.set_xticks([0, 1], ["lane", "bank (4-byte word mod 32)"])
    _bare(ax)
    where = f"'{sample.array}'" if sample.array else "shared memory"
    verdict = f"{degree}-way bank conflict" if degree > 1 else "no bank conflict"
    ax.set_title(title or f"{_where(sample)}: {len(sample.lanes)} lanes on {where}, {verdict}", fontsize=11)
    _key(fig, [(LANE_COLOR, "lane that takes part"), (GOOD_COLOR, "bank serving one word"),
               (CONFLICT_COLOR, "bank serving several words, one after another"), (IDLE_COLOR, "idle lane or bank")])
    return fig


def _words_of(sample: Sample, lane: int) -> range:
    offset = sample.offsets[lane]
    return range(offset // 4, (offset + max(sample.width, 1) - 1) // 4 + 1)


def active_lanes(counters: Counters, line: int | str, *, title: str | None = None, file: str | None = None) -> Figure:
    """The sampled warp's executions of ``line`` (a number, or text the line contains), one row
    each: which lanes took part (divergence shows as gaps). Drawn from the recorded accesses of the
    line, or its basic blocks."""
    line = counters.find(line, file) if isinstance(line, str) else line
    found = [s for s in counters.samples if s.line == line and (file is None or s.file == file)]
    if not found:
        raise KeyError(f"the sampled warp did not execute line {line}")
    memory = [s for s in found if s.op != "block"]
    chosen = memory or found
    key = (chosen[0].space, chosen[0].op)
    rows = [s for s in chosen if (s.space, s.op, s.site) == key + (chosen[0].site,)]
    grid = np.array([[s.mask >> lane & 1 for lane in range(32)] for s in rows], dtype=float)
    fig = Figure(figsize=(7.5, 1.6 + 0.3 * len(rows)), layout="constrained")
    ax = fig.subplots()
    from matplotlib.colors import ListedColormap
    ax.imshow(grid, cmap=ListedColormap([IDLE_COLOR, LANE_COLOR]), aspect="auto", vmin=0, vmax=1)
    ax.set_xticks(range(0, 32, 4))
    ax.set_yticks(range(len(rows)), [f"{k + 1}" for k in range(len(rows))])
    ax.tick_params(labelsize=LABEL_SIZE)
    ax.set_xlabel("lane", fontsize=LABEL_SIZE + 1)
    ax.set_ylabel("k-th time the warp ran the line", fontsize=LABEL_SIZE + 1)
    average = grid.sum() / len(rows) if rows else 0.0
    ax.set_title(title or f"{rows[0].file}:{line}: lanes of the sampled warp that ran it, {len(rows)} "
                          f"executions, {average:.1f} active lanes on average", fontsize=11)
    _key(fig, [(LANE_COLOR, "lane runs the line"), (IDLE_COLOR, "lane idle (diverged or finished)")])
    return fig
