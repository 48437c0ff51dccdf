"""Figures for a chapter's results: time per variant, bytes three ways, and the roofline.

Every function returns a matplotlib Figure (it never calls ``plt.show()``); titles, axes with
units, ceilings drawn and named. ``label`` (e.g. :func:`pmpp.results.label`) is printed under
the figure: where the numbers come from. Timings taken on the CPU engine say so on the figure.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pmpp.timing import CPU_WALL_CLOCK

VARIANT_COLOR = "tab:blue"
LIBRARY_COLOR = "tab:orange"
WRONG_COLOR = "tab:red"
ROOF_COLOR = "0.25"
PEAK_COLOR = "0.6"
TRAFFIC_COLORS = ("0.55", "tab:green", "tab:purple")   # model, L1 requests, DRAM


def plot_variants(entries: Sequence[Mapping[str, Any]], *, title: str, label: str | None = None,
                  device: str | None = None) -> Figure:
    """Median time per entry: library routines hatched, and over the kernels of each problem and
    precision the fastest library routine of that same problem and precision drawn across as the bar
    to beat (:func:`to_beat`). The title names the device (``device``, else read from ``label``).
    (What the bytes were, three ways, is :func:`bytes_three_ways`.)"""
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    ax_time = fig.subplots()
    _time_panel(ax_time, entries, [e["name"] for e in entries])
    fig.suptitle(with_device(title, device or device_of(label, entries)))
    _footer(fig, entries, label)
    return fig


def plot_problems(panels: Mapping[str, Sequence[Mapping[str, Any]]], *, title: str, label: str | None = None,
                  device: str | None = None, ncols: int = 2) -> Figure:
    """One time panel (as in :func:`plot_variants`) per problem, e.g. forward and backward in float32
    and float16: ``panels`` maps a panel's title to its entries. Each panel's bar to beat is the
    fastest library routine of its own problem and precision."""
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(6 * ncols, 4.2 * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, (name, entries) in zip(axes, panels.items()):
        _time_panel(ax, entries, [e["name"] for e in entries])
        ax.set_title(name)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    every = [e for entries in panels.values() for e in entries]
    fig.suptitle(with_device(title, device or device_of(label, every)))
    _footer(fig, every, label)
    return fig


_PRECISIONS = [(name, re.compile(rf"(?<![a-z0-9])({pattern})(?![a-z0-9])")) for name, pattern in (
    ("tf32", r"tf32"), ("bfloat16", r"bf16|bfloat16"), ("float16", r"fp16|float16|half"),
    ("float64", r"fp64|float64|double"), ("float32", r"fp32|float32"))]


def precision(entry: Mapping[str, Any]) -> str | None:
    """The arithmetic precision of an entry: named in its name (``"cuDNN TF32 (torch conv2d)"``)
    if there, else in its problem (``"... fp32"``), else None. The name wins: a library routine run
    in TF32 on an FP32 problem is a TF32 entry."""
    for text in (entry.get("name") or "", entry.get("problem") or ""):
        for name, word in _PRECISIONS:
            if word.search(str(text).lower()):
                return name
    return None


def _problem_key(entry: Mapping[str, Any]) -> tuple[str, str | None]:
    """(the problem without its precision word, the entry's precision): a TF32 kernel's problem
    ("... tf32") and a library routine run in TF32 on the same shape ("... fp32") match."""
    shape = str(entry.get("problem") or "").lower()
    for _, word in _PRECISIONS:
        shape = word.sub("", shape)
    return " ".join(shape.split()), precision(entry)


def to_beat(entries: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], list[int]]]:
    """The bars to beat: for each (problem, precision) of the kernels (``kind`` "variant") among
    ``entries``, the fastest library routine of that same problem and precision, with the indices
    of the kernels it is drawn over. A library routine of another problem or precision (a 256-bin
    library histogram beside 7-bin kernels, cuDNN in TF32 beside FP32 kernels) is no bar for them."""
    groups: dict[tuple, list[int]] = {}
    for i, e in enumerate(entries):
        if e["kind"] == "variant":
            groups.setdefault(_problem_key(e), []).append(i)
    found = []
    for key, kernels in groups.items():
        library = [e for e in entries if e["kind"] == "library" and _problem_key(e) == key]
        if library:
            found.append((min(library, key=lambda e: e["median_us"]), kernels))
    return found


def device_of(label: str | None, entries: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """The device a figure's numbers come from, read from its ``label`` ("recorded on NVIDIA H100
    80GB HBM3, 2026-11-21 (commit abc1234)" -> "NVIDIA H100 80GB HBM3"); "CPU engine" where the
    entries were timed on the CPU engine; else None."""
    if any(e.get("clock") == CPU_WALL_CLOCK for e in entries):
        return "CPU engine"
    found = re.search(r"\bon (?:the )?(.+?)(?:,|\s\(|;|$)", label or "")
    return found.group(1).strip() if found else None


def with_device(title: str, device: str | None) -> str:
    """``title`` naming ``device``: unchanged if it names it already or there is none."""
    if not device or device.lower() in title.lower():
        return title
    return f"{title} — {device}"


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
        ax_bytes.bar(at + offset, [(r[f"{key}_bytes"] or 0) / 1e6 for r in rows], width, label=legend,
                     color=TRAFFIC_COLORS[k])
        ax_oi.bar(at + offset, [r[f"{key}_intensity"] or 0 for r in rows], width, label=legend, color=TRAFFIC_COLORS[k])
    for ax, ylabel, what in ((ax_bytes, "MB (log scale)", "bytes moved"),
                             (ax_oi, "arithmetic intensity (OP/B, log scale)", "operations per byte, from each")):
        readable_log_axis(ax, "y")
        _xticks(ax, list(at), names)
        ax.set_ylabel(ylabel)
        ax.set_title(what)
    _legend_above(ax_bytes, "bytes moved")
    fig.suptitle(with_device(title, device_of(label)))
    _footer(fig, [], label)
    return fig


def _xticks(ax, at: Sequence[float], names: Sequence[str]) -> None:
    """Tick labels that do not run into each other: long names wrapped onto two lines, rotated 45°
    and anchored at the tick, smaller where there are many."""
    wrapped = [wrap_name(n) for n in names]
    rotate = len(names) > 3 or max((len(n) for n in names), default=0) > 12
    ax.set_xticks(list(at), wrapped, rotation=45 if rotate else 0, ha="right" if rotate else "center",
                  rotation_mode="anchor", fontsize=8 if len(names) > 8 else 9)


def wrap_name(name: Any, width: int = 22) -> str:
    """A long name on lines of about ``width`` characters, broken after a separator (". _ :" or a
    space), never inside a word: ``cupyx.scipy.ndimage.correlate`` -> ``cupyx.scipy.ndimage.`` and
    ``correlate``."""
    text = str(name)
    if len(text) <= width + 2:
        return text
    pieces = re.findall(r"[^ ._:]+[ ._:]*", text)
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


def _runs(indices: Sequence[int]) -> list[list[int]]:
    """[0, 1, 2, 5, 6] -> [[0, 1, 2], [5, 6]]."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def spread_bars(entries: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """Error bars of median times: from the first to the third quartile where recorded (a robust
    spread); none (zero) for recordings that kept only min and max, which one outlier stretches."""
    low = [e["median_us"] - e["q1_us"] if e.get("q1_us") is not None else 0.0 for e in entries]
    high = [e["q3_us"] - e["median_us"] if e.get("q3_us") is not None else 0.0 for e in entries]
    return [low, high]


def _time_panel(ax, entries, names) -> None:
    x = range(len(entries))
    med = [e["median_us"] for e in entries]
    bars = ax.bar(x, med, yerr=spread_bars(entries), capsize=3, color=[_color(e) for e in entries],
                  edgecolor="black")
    for bar, e in zip(bars, entries):
        if e["kind"] == "library":
            bar.set_hatch("//")
        top = (bar.get_x() + bar.get_width() / 2, bar.get_height())
        if e.get("correct") is False:
            ax.annotate("wrong", top, ha="center", va="bottom", color=WRONG_COLOR, fontsize=8)
        elif is_noisy_entry(e):
            bar.set_hatch("xx")
            ax.annotate("noisy", top, ha="center", va="bottom", color=NOISY_COLOR, fontsize=8)
    bars_to_beat = to_beat(entries)
    for best, kernels in bars_to_beat:
        xs: list[float] = []
        for run in _runs(kernels):      # over the kernels it is a bar for, nowhere else
            xs += [run[0] - 0.45, run[-1] + 0.45, float("nan")]
        what = f" ({precision(best) or best['problem']})" if len(bars_to_beat) > 1 and best.get("problem") else ""
        ax.plot(xs[:-1], [best["median_us"]] * (len(xs) - 1), color=LIBRARY_COLOR, linestyle="--",
                label=f"to beat: {best['name']} ({best['median_us']:.1f} µs){what}")
    if bars_to_beat:     # above the axes: it never covers a bar
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, frameon=False)
    if med and max(med) / min(med) > 30:
        readable_log_axis(ax, "y")
    ax.margins(y=0.08)
    _xticks(ax, list(x), names)
    ax.set_ylabel("median time (µs), lower is better; bars: quartiles")


def readable_log_axis(ax, which: str = "y") -> None:
    """A log axis labelled 1, 2, 5, 10, 20, 50, ... in plain numbers (no "6×10²" ticks)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:.3g}"))
    axis.set_minor_formatter(NullFormatter())


def is_noisy_entry(entry: Mapping[str, Any]) -> bool:
    """A recorded row whose repeats disagreed (:func:`pmpp.results.noisy`)."""
    from .results import noisy
    return entry.get("median_us") is not None and noisy(entry)


GPU_COLORS = {"H100": "tab:blue", "H200": "tab:green", "A100": "tab:purple", "T4": "tab:brown", "L4": "tab:olive",
              "RTX 4090": "tab:cyan"}


def gpu_color(gpu: str, k: int = 0) -> str:
    """One colour per GPU in every figure (by its short name), else one of the others by position."""
    spare = ("tab:pink", "tab:gray", "tab:red", "tab:orange")
    return GPU_COLORS.get(gpu, spare[k % len(spare)])
NOISY_COLOR = "0.45"


def roof_bars(names: Sequence[str], percents: Mapping[str, Sequence[float | None]], *, title: str,
              roof: str = "copy bandwidth", spreads: Mapping[str, Sequence[tuple[float, float] | None]] | None = None,
              noisy: Mapping[str, Sequence[bool]] | None = None, library: Sequence[str] = (),
              goal: float | None = None, goal_label: str = "goal", label: str | None = None) -> Figure:
    """Per name, one horizontal bar per GPU: the time floor (the bytes that must move over that GPU's
    measured ``roof``) over the measured time, in percent — 100% is the roof. For chapters whose
    variants share one arithmetic intensity, where a roofline would pile them on one x. ``percents``:
    GPU -> a value per name (None: not recorded on that GPU); ``spreads``: GPU -> (low, high)
    percent from the quartiles; ``noisy``: GPU -> flags (hatched, marked, never a claim);
    ``library`` names are hatched; ``goal``: a percent drawn across, with ``goal_label``."""
    gpus = list(percents)
    height = 0.8 / max(len(gpus), 1)
    fig = Figure(figsize=(8.5, 1.2 + 0.34 * len(names) * max(len(gpus), 1) ** 0.6), layout="constrained")
    ax = fig.subplots()
    at = np.arange(len(names))[::-1]
    top = 100.0
    for k, gpu in enumerate(gpus):
        y = at + (len(gpus) - 1) / 2 * height - k * height
        for i, (name, value) in enumerate(zip(names, percents[gpu])):
            if value is None:
                ax.text(1, y[i], f"not recorded on the {gpu}", va="center", fontsize=8, color=NOISY_COLOR)
                continue
            flagged = bool(noisy and noisy[gpu][i])
            span = spreads and spreads[gpu][i]
            err = [[value - span[0]], [span[1] - value]] if span else None
            bar = ax.barh(y[i], value, height, xerr=err, capsize=2, color=gpu_color(gpu, k),
                          edgecolor="black", linewidth=0.5, label=gpu if i == 0 else None)[0]
            if name in library:
                bar.set_hatch("//")
            if flagged:
                bar.set_hatch("xx")
                bar.set_facecolor("0.85")
            ax.text(value + 1, y[i], f"{value:.0f}%" + (" noisy" if flagged else ""), va="center", fontsize=8,
                    color=NOISY_COLOR if flagged else "black",
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.5, alpha=0.8))
            top = max(top, value + (span[1] - value if span else 0))
    ax.axvline(100, color=ROOF_COLOR, linewidth=1.5, label=f"the roof: each GPU's {roof}")
    if goal is not None:
        ax.axvline(goal, color=LIBRARY_COLOR, linestyle="--", linewidth=1, label=goal_label)
    ax.set_yticks(at, [wrap_name(n, 28) for n in names], fontsize=9)
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel(f"time floor over measured time (% of the {roof} roof; higher is better)")
    _legend_above(ax, title)
    ax.grid(True, axis="x", alpha=0.3)
    _footer(fig, [], label)
    return fig


def predicted_bars(names: Sequence[str], recorded: Mapping[str, Sequence[float | None]],
                   predicted: Mapping[str, Sequence[float | None]], *, title: str, label: str | None = None) -> Figure:
    """Per name, for each GPU, the recorded time (a solid bar) beside the time the model predicts for
    it (a hatched bar of the same colour), on a log axis. ``recorded`` and ``predicted``: GPU -> a
    time in µs per name (None: not recorded, or not predicted)."""
    gpus = list(dict.fromkeys([*recorded, *predicted]))
    height = 0.8 / max(2 * len(gpus), 1)
    fig = Figure(figsize=(8.5, 1.4 + 0.3 * len(names) * max(len(gpus), 1)), layout="constrained")
    ax = fig.subplots()
    at = np.arange(len(names))[::-1]
    bars = [(gpu, kind, values) for gpu in gpus
            for kind, values in (("recorded", recorded.get(gpu)), ("predicted", predicted.get(gpu))) if values]
    for k, (gpu, kind, values) in enumerate(bars):
        y = at + (len(bars) - 1) / 2 * height - k * height
        for i, value in enumerate(values):
            if value is None:
                continue
            bar = ax.barh(y[i], value, height, color=gpu_color(gpu, gpus.index(gpu)), edgecolor="black",
                          linewidth=0.5, label=f"{gpu} {kind}" if i == next(j for j, v in enumerate(values) if v) else None)[0]
            if kind == "predicted":
                bar.set_hatch("//")
                bar.set_alpha(0.6)
            ax.text(value * 1.03, y[i], f"{value:,.0f} µs", va="center", fontsize=7)
    readable_log_axis(ax, "x")
    shown = [v for _, _, values in bars for v in values if v]
    if shown:      # every bar grows from one power of ten, so that lengths compare
        ax.set_xlim(10 ** np.floor(np.log10(min(shown))), max(shown) * 1.6)
    ax.set_yticks(at, [wrap_name(n, 28) for n in names], fontsize=9)
    ax.set_xlabel("time per run, µs (log scale): recorded solid, predicted from the CPU engine's counts hatched")
    ax.grid(True, axis="x", alpha=0.3)
    _legend_above(ax, title)
    _footer(fig, [], label)
    return fig


def sweep(settings: Sequence[str], times: Mapping[str, Sequence[float | None]], *, title: str, xlabel: str,
          spreads: Mapping[str, Sequence[tuple[float, float] | None]] | None = None,
          bars: Mapping[str, tuple[str, float]] | None = None, label: str | None = None) -> Figure:
    """Median time against one compile-time parameter, a line per GPU (``times``: GPU -> a time per
    setting, None where not recorded), the quartiles as error bars, and each GPU's bar to beat
    (``bars``: GPU -> (name, µs)) dashed across in that GPU's colour."""
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(settings))
    for k, (gpu, ys) in enumerate(times.items()):
        color = gpu_color(gpu, k)
        shown = [(i, v) for i, v in enumerate(ys) if v is not None]
        if not shown:
            continue
        xs, vs = zip(*shown)
        err = None
        if spreads:
            err = [[vs[j] - (spreads[gpu][i] or (vs[j], vs[j]))[0] for j, i in enumerate(xs)],
                   [(spreads[gpu][i] or (vs[j], vs[j]))[1] - vs[j] for j, i in enumerate(xs)]]
        ax.errorbar(xs, vs, yerr=err, marker="o", color=color, capsize=3, label=gpu)
        if bars and gpu in bars:
            name, us = bars[gpu]
            ax.axhline(us, color=color, linestyle="--", linewidth=1, label=f"{name} on the {gpu} ({us:,.0f} µs)")
    ax.set_xticks(x, [wrap_name(s, 16) for s in settings], fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("median time (µs), lower is better")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend_above(ax, title)
    _footer(fig, [], label)
    return fig


def _legend_above(ax, title: str) -> None:
    """The legend in a row between the title and the axes, where it covers nothing."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(labels), 4),
              fontsize=8, frameon=False)
    ax.set_title(title, pad=10 + 14 * -(-len(labels) // 4))


def roofline(entries: Sequence[Mapping[str, Any]], ceilings: Any, *, title: str,
             label: str | None = None, device: str | None = None) -> Figure:
    """Log-log roofline: the memory roof (copy bandwidth; the read-only bandwidth dashed where it was
    measured) and the compute roof (FP32 FMA rate), datasheet peaks dotted beside them, and each
    entry a labeled point at (OP/B, GFLOP/s). Roofs and marker kinds are named in one legend; a
    point's label is moved off the labels and points already placed (:func:`place_labels`). The
    title names the device (``device``, else read from ``label``).
    ``ceilings``: a :class:`pmpp.ceilings.Ceilings` or a results file's ``"ceilings"`` dict."""
    copy, fp32 = _ceiling(ceilings, "copy_gbs"), _ceiling(ceilings, "fp32_gflops")
    points = [e for e in entries if (e.get("intensity") or 0) > 0 and (e.get("gflops") or 0) > 0]
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    ridge = fp32 / copy
    xs = [e["intensity"] for e in points] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    ylo, yhi = min([copy * lo] + [e["gflops"] for e in points]) / 2, fp32 * 3
    ax.plot([lo, ridge, hi], [copy * lo, fp32, fp32], color=ROOF_COLOR, linewidth=2,
            label=f"memory roof: copy {copy:,.0f} GB/s; compute roof: FP32 FMA {fp32:,.0f} GFLOP/s")
    read = _optional_ceiling(ceilings, "read_gbs")
    if read:
        ax.plot([lo, fp32 / read], [read * lo, fp32], color=ROOF_COLOR, linewidth=1, linestyle="--",
                label=f"read-only roof: {read:,.0f} GB/s")
    _peaks(ax, ceilings, lo, hi)
    for e in points:
        ax.plot(e["intensity"], e["gflops"], marker="s" if e["kind"] == "library" else "o", linestyle="none",
                color=_color(e))
    spots = place_labels([(e["intensity"], e["gflops"], e["name"]) for e in points], (lo, hi), (ylo, yhi))
    for e, (dx, dy, ha, va) in zip(points, spots):
        far = abs(dy) > 10 or abs(dx) > 10
        ax.annotate(e["name"], (e["intensity"], e["gflops"]), textcoords="offset points", xytext=(dx, dy),
                    ha=ha, va=va, fontsize=LABEL_SIZE,
                    arrowprops=dict(arrowstyle="-", color="0.5", linewidth=0.5) if far else None)
    handles, _ = ax.get_legend_handles_labels()
    kinds = {e["kind"] for e in points}
    if "variant" in kinds:
        handles.append(Line2D([], [], marker="o", linestyle="none", color=VARIANT_COLOR, label="kernel variant"))
    if "library" in kinds:
        handles.append(Line2D([], [], marker="s", linestyle="none", color=LIBRARY_COLOR, label="library routine"))
    if any(e.get("correct") is False for e in points):
        handles.append(Line2D([], [], marker="o", linestyle="none", color=WRONG_COLOR, label="wrong result"))
    ax.legend(handles=handles, loc="lower right", fontsize=7, framealpha=0.9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(ylo, yhi)
    ax.set_xlabel("arithmetic intensity (OP/B)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.set_title(with_device(title, device or device_of(label, entries)))
    ax.grid(True, which="both", alpha=0.3)
    _footer(fig, entries, label)
    return fig


def roofline_gpus(points: Mapping[str, Sequence[Mapping[str, Any]]], ceilings: Mapping[str, Any], *, title: str,
                  label: str | None = None) -> Figure:
    """One log-log roofline per GPU on shared axes (``ceilings``: GPU -> its measured ceilings), each
    GPU's roof and points in its colour; the same kernel on two GPUs joined by a thin line, labelled
    once. ``points``: GPU -> entries (with ``intensity`` and ``gflops``)."""
    fig = Figure(figsize=(8.5, 5.6), layout="constrained")
    ax = fig.subplots()
    every = [e for entries in points.values() for e in entries if (e.get("intensity") or 0) > 0 and e.get("gflops")]
    ridges = [_ceiling(c, "fp32_gflops") / _ceiling(c, "copy_gbs") for c in ceilings.values()]
    xs = [e["intensity"] for e in every] + ridges
    lo, hi = min(xs) / 3, max(xs) * 3
    ylo = min([min(_ceiling(c, "copy_gbs") for c in ceilings.values()) * lo] + [e["gflops"] for e in every]) / 2
    yhi = max(_ceiling(c, "fp32_gflops") for c in ceilings.values()) * 3
    for k, (gpu, c) in enumerate(ceilings.items()):
        copy, fp32 = _ceiling(c, "copy_gbs"), _ceiling(c, "fp32_gflops")
        ridge = fp32 / copy
        ax.plot([lo, ridge, hi], [copy * lo, fp32, fp32], color=gpu_color(gpu, k), linewidth=2,
                label=f"{gpu}: copy {copy:,.0f} GB/s, FP32 {fp32:,.0f} GFLOP/s, ridge {ridge:.1f} OP/B")
        ax.plot([ridge, ridge], [ylo, fp32], color=gpu_color(gpu, k), linestyle=":", linewidth=1)
        for e in points.get(gpu, ()):
            ax.plot(e["intensity"], e["gflops"], marker="s" if e["kind"] == "library" else "o", linestyle="none",
                    color=gpu_color(gpu, k), markersize=6)
    by_name: dict[str, list] = {}
    for e in every:
        by_name.setdefault(e["name"], []).append(e)
    for same in by_name.values():
        if len(same) > 1:
            ax.plot([e["intensity"] for e in same], [e["gflops"] for e in same], color="0.6", linewidth=0.8)
    tops = [max(same, key=lambda e: e["gflops"]) for same in by_name.values()]
    spots = place_labels([(e["intensity"], e["gflops"], e["name"]) for e in tops], (lo, hi), (ylo, yhi))
    for e, (dx, dy, ha, va) in zip(tops, spots):
        ax.annotate(e["name"], (e["intensity"], e["gflops"]), textcoords="offset points", xytext=(dx, dy),
                    ha=ha, va=va, fontsize=9)
    ax.set_xscale("log")
    readable_log_axis(ax, "x")
    readable_log_axis(ax, "y")
    ax.set_xlim(lo, hi)
    ax.set_ylim(ylo, yhi)
    ax.set_xlabel("arithmetic intensity (OP/B)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    _legend_above(ax, title)
    _footer(fig, every, label)
    return fig


LABEL_SIZE = 8
# Where a point's label may go, in offset points from the point, tried in this order.
_SPOTS = [(7, 0, "left", "center"), (-7, 0, "right", "center"), (5, 8, "left", "bottom"),
          (5, -8, "left", "top"), (-5, 8, "right", "bottom"), (-5, -8, "right", "top")]
_SPOTS += [(sx * 9, sy * step, "left" if sx > 0 else "right", "bottom" if sy > 0 else "top")
           for step in (18, 28, 40) for sx in (1, -1) for sy in (1, -1)]


def place_labels(points: Sequence[tuple[float, float, str]], xlim: tuple[float, float], ylim: tuple[float, float],
                 size: tuple[float, float] = (500.0, 330.0)) -> list[tuple[float, float, str, str]]:
    """Offsets for the labels of points on log-log axes so that no label covers another or a point:
    each label, in turn, takes the first of a list of spots around its point (right, left, above,
    below, then further out) that overlaps nothing placed so far and stays inside the axes, else the
    spot that overlaps least. ``size``: the axes in points. Returns (dx, dy, ha, va) per point."""
    def at(x, y):
        fx = (np.log(x) - np.log(xlim[0])) / (np.log(xlim[1]) - np.log(xlim[0]))
        fy = (np.log(y) - np.log(ylim[0])) / (np.log(ylim[1]) - np.log(ylim[0]))
        return fx * size[0], fy * size[1]

    def box(px, py, dx, dy, ha, va, text):
        w, h = len(text) * LABEL_SIZE * 0.55, LABEL_SIZE * 1.25
        x0 = px + dx if ha == "left" else px + dx - w
        y0 = {"center": py + dy - h / 2, "bottom": py + dy, "top": py + dy - h}[va]
        return x0, y0, x0 + w, y0 + h

    def overlap(a, b):
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    where = [at(x, y) for x, y, _ in points]
    taken = [(px - 4, py - 4, px + 4, py + 4) for px, py in where]
    spots = [None] * len(points)
    for i in sorted(range(len(points)), key=lambda i: (where[i][0], where[i][1])):
        px, py = where[i]
        best, best_cost = None, None
        for spot in _SPOTS:
            b = box(px, py, *spot, points[i][2])
            outside = max(0, -b[0]) + max(0, b[2] - size[0]) + max(0, -b[1]) + max(0, b[3] - size[1])
            cost = sum(overlap(b, t) for k, t in enumerate(taken) if k != i) + 50 * outside
            if best_cost is None or cost < best_cost:
                best, best_cost = (spot, b), cost
            if cost == 0:
                break
        spots[i] = best[0]
        taken.append(best[1])
    return spots


def _ceiling(ceilings: Any, name: str) -> float:
    value = _optional_ceiling(ceilings, name)
    if not value or value <= 0:
        raise ValueError(f"roofline needs a positive ceilings {name!r}, got {value!r}")
    return float(value)


def _optional_ceiling(ceilings: Any, name: str) -> float | None:
    value = ceilings.get(name) if isinstance(ceilings, Mapping) else getattr(ceilings, name, None)
    return float(value) if value else None


def _peaks(ax, ceilings, lo: float, hi: float) -> None:
    bw, fp32 = _optional_ceiling(ceilings, "peak_bw_gbs"), _optional_ceiling(ceilings, "peak_fp32_gflops")
    if bw and fp32:
        ridge = fp32 / bw
        ax.plot([lo, ridge, hi], [bw * lo, fp32, fp32], color=PEAK_COLOR, linestyle=":",
                label=f"datasheet peaks: {bw:,.0f} GB/s, {fp32:,.0f} GFLOP/s")


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
    _xticks(ax, list(at), list(categories))
    ax.set_ylabel(ylabel)
    ax.set_title(with_device(title, device_of(label)))
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
    ax.set_title(with_device(title, device_of(label)))
    ax.legend(fontsize=8)
    _footer(fig, [], label)
    return fig
