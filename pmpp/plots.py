"""Figures for a chapter's results: time per variant, bytes three ways, and the roofline.

Every function returns a matplotlib Figure (it never calls ``plt.show()``); titles, axes with
units, ceilings drawn and named. ``label`` (e.g. :func:`pmpp.results.label`) is printed under
the figure: where the numbers come from. Timings taken on the CPU engine say so on the figure.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from pmpp.timing import CPU_WALL_CLOCK

VARIANT_COLOR = "tab:blue"
LIBRARY_COLOR = "tab:orange"
WRONG_COLOR = "tab:red"
ROOF_COLOR = "0.25"
PEAK_COLOR = "0.6"
TRAFFIC_COLORS = ("0.55", "tab:green", "tab:purple")   # model, L1 requests, DRAM


def plot_variants(entries: Sequence[Mapping[str, Any]], *, title: str, label: str | None = None) -> Figure:
    """Median time per entry: library routines hatched, and the fastest one drawn across as the bar
    to beat. (What the bytes were, three ways, is :func:`bytes_three_ways`.)"""
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax_time = fig.subplots()
    _time_panel(ax_time, entries, [e["name"] for e in entries])
    fig.suptitle(title)
    _footer(fig, entries, label)
    return fig


def bytes_three_ways(rows: Sequence[Mapping[str, Any]], *, title: str, label: str | None = None,
                     model_label: str = "book model") -> Figure:
    """Bytes per variant, three ways (rows of :func:`pmpp.explain.traffic`): the book's model, the
    bytes the warps request from L1 (counted on the CPU engine) and the bytes that reached DRAM
    (Nsight Compute); beside them the arithmetic intensity each gives. Where requests exceed the
    model, the kernel re-reads or reads whole sectors it half uses; where DRAM is below the
    requests, the caches absorbed the difference. ``model_label`` names the model's bars (a chapter
    whose model counts only the compulsory bytes says so)."""
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax_bytes, ax_oi = fig.subplots(1, 2)
    names = [r["variant"] for r in rows]
    ways = {model_label: "model", "requested at L1 (CPU engine)": "requested", "DRAM (Nsight Compute)": "dram"}
    at = np.arange(len(rows))
    width = 0.8 / len(ways)
    for k, (legend, key) in enumerate(ways.items()):
        offset = (k - (len(ways) - 1) / 2) * width
        ax_bytes.bar(at + offset, [r[f"{key}_bytes"] or 0 for r in rows], width, label=legend, color=TRAFFIC_COLORS[k])
        ax_oi.bar(at + offset, [r[f"{key}_intensity"] or 0 for r in rows], width, label=legend, color=TRAFFIC_COLORS[k])
    for ax, ylabel, what in ((ax_bytes, "bytes", "bytes moved (log scale)"),
                             (ax_oi, "arithmetic intensity (OP/B)", "operations per byte, from each")):
        ax.set_yscale("log")
        ax.set_xticks(list(at), names, rotation=30, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(what)
    ax_bytes.legend(fontsize=8)
    fig.suptitle(title)
    _footer(fig, [], label)
    return fig


def _time_panel(ax, entries, names) -> None:
    x = range(len(entries))
    med = [e["median_us"] for e in entries]
    err = [[m - e["min_us"] for m, e in zip(med, entries)], [e["max_us"] - m for m, e in zip(med, entries)]]
    bars = ax.bar(x, med, yerr=err, capsize=3, color=[_color(e) for e in entries], edgecolor="black")
    for bar, e in zip(bars, entries):
        if e["kind"] == "library":
            bar.set_hatch("//")
        if e.get("correct") is False:
            ax.annotate("wrong", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", color=WRONG_COLOR, fontsize=8)
    library = [e for e in entries if e["kind"] == "library"]
    if library:
        best = min(library, key=lambda e: e["median_us"])
        ax.axhline(best["median_us"], color=LIBRARY_COLOR, linestyle="--",
                   label=f"to beat: {best['name']} ({best['median_us']:.1f} µs)")
        ax.legend(loc="upper right", fontsize=8)
    if med and max(med) / min(med) > 30:
        ax.set_yscale("log")
    ax.set_xticks(list(x), names, rotation=30, ha="right")
    ax.set_ylabel("median time (µs)")
    ax.set_title("time per run (lower is better)")


def roofline(entries: Sequence[Mapping[str, Any]], ceilings: Any, *, title: str,
             label: str | None = None) -> Figure:
    """Log-log roofline: the memory roof (copy bandwidth) and the compute roof (FP32 FMA rate),
    datasheet peaks dotted beside them, and each entry a labeled point at (OP/B, GFLOP/s).
    ``ceilings``: a :class:`pmpp.ceilings.Ceilings` or a results file's ``"ceilings"`` dict."""
    copy, fp32 = _ceiling(ceilings, "copy_gbs"), _ceiling(ceilings, "fp32_gflops")
    points = [e for e in entries if (e.get("intensity") or 0) > 0 and (e.get("gflops") or 0) > 0]
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    ridge = fp32 / copy
    xs = [e["intensity"] for e in points] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    ax.plot([lo, ridge, hi], [copy * lo, fp32, fp32], color=ROOF_COLOR, linewidth=2)
    mid = (lo * ridge) ** 0.5
    ax.annotate(f"memory roof: copy {copy:,.0f} GB/s", (mid, copy * mid), textcoords="offset points",
                xytext=(-6, 6), ha="right", fontsize=9, color=ROOF_COLOR)
    ax.annotate(f"compute roof: FP32 FMA {fp32:,.0f} GFLOP/s", (hi, fp32), textcoords="offset points",
                xytext=(-6, 6), ha="right", fontsize=9, color=ROOF_COLOR)
    _peaks(ax, ceilings, lo, hi)
    for e, left in zip(points, _label_sides(points)):
        ax.plot(e["intensity"], e["gflops"], marker="s" if e["kind"] == "library" else "o", linestyle="none",
                color=_color(e))
        ax.annotate(e["name"], (e["intensity"], e["gflops"]), textcoords="offset points",
                    xytext=(-7 if left else 7, 0), ha="right" if left else "left", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min([copy * lo] + [e["gflops"] for e in points]) / 2, fp32 * 3)
    ax.set_xlabel("arithmetic intensity (OP/B)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    _footer(fig, entries, label)
    return fig


def _label_sides(points: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Label left of the point (True) where a point just below it already has its label right."""
    order = sorted(range(len(points)), key=lambda i: (points[i]["intensity"], points[i]["gflops"]))
    left = [False] * len(points)
    for prev, i in zip(order, order[1:]):
        a, b = points[prev], points[i]
        close = b["intensity"] / a["intensity"] < 1.3 and b["gflops"] / a["gflops"] < 1.25
        left[i] = close and not left[prev]
    return left


def _ceiling(ceilings: Any, name: str) -> float:
    value = ceilings.get(name) if isinstance(ceilings, Mapping) else getattr(ceilings, name, None)
    if not value or value <= 0:
        raise ValueError(f"roofline needs a positive ceilings {name!r}, got {value!r}")
    return float(value)


def _peaks(ax, ceilings, lo: float, hi: float) -> None:
    get = ceilings.get if isinstance(ceilings, Mapping) else lambda k: getattr(ceilings, k, None)
    bw, fp32 = get("peak_bw_gbs"), get("peak_fp32_gflops")
    if bw and fp32:
        ridge = fp32 / bw
        ax.plot([lo, ridge, hi], [bw * lo, fp32, fp32], color=PEAK_COLOR, linestyle=":",
                label=f"datasheet peaks: {bw:,.0f} GB/s, {fp32:,.0f} GFLOP/s")
        ax.legend(loc="lower right", fontsize=8)


def _color(entry: Mapping[str, Any]) -> str:
    if entry.get("correct") is False:
        return WRONG_COLOR
    return LIBRARY_COLOR if entry["kind"] == "library" else VARIANT_COLOR


def plot_bars(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str,
              ylabel: str, label: str | None = None) -> Figure:
    """Grouped bars: one group per category, one bar per series (e.g. bytes per point that a model
    predicts beside those a profiler measured, per variant)."""
    fig = Figure(figsize=(8, 3.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(len(series), 1)
    at = np.arange(len(categories))
    for k, (name, ys) in enumerate(series.items()):
        ax.bar(at + (k - (len(series) - 1) / 2) * width, ys, width, label=name)
    ax.set_xticks(at, list(categories))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    _footer(fig, [], label)
    return fig


def _footer(fig: Figure, entries: Sequence[Mapping[str, Any]], label: str | None) -> None:
    notes = [label] if label else []
    if any(e.get("clock") == CPU_WALL_CLOCK for e in entries):
        notes.append("CPU engine timings (cpu wall clock): they say nothing about a GPU")
    if notes:
        fig.supxlabel("; ".join(notes), fontsize=8, color="0.3")


def plot_intensity_table(xs: Sequence[float], series: Mapping[str, Sequence[float]], *, title: str,
                         xlabel: str, ylabel: str = "arithmetic intensity (OP/B)",
                         ridge: float | None = None, label: str | None = None) -> Figure:
    """A model table as lines, e.g. OP/B against tile size for each kernel; ``ridge`` (the
    ceilings' OP/B where the roofs meet) is drawn across: above it a kernel can be compute bound."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", label=name)
    if ridge:
        ax.axhline(ridge, color=ROOF_COLOR, linestyle="--", label=f"ridge point ({ridge:.1f} OP/B)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    _footer(fig, [], label)
    return fig
