"""What a chapter notebook needs beside its kernels: the recordings of every GPU side by side,
checked runs on this machine, each step measured on each recorded GPU, and the figures that
compare them. One object per chapter::

    lab = pmpp.lab.Lab("reduction")
    lab.diff("01_simple", "02_convergent")      # the code lines that changed
    lab.check("02_convergent")                  # fresh random inputs, this machine's backend
    lab.step("01_simple", "02_convergent")      # the recorded speedup on every GPU, printed
    lab.table(["05_coarsened", "15_vectorized", "cub::DeviceReduce"], roof="read_gbs")

A ratio is always taken between two rows of one recorded run (one GPU, one commit, the same
inputs). A row whose repeats disagreed (:func:`pmpp.results.noisy`) is shown as noisy and raises
:class:`NoisyMeasurement` when a claim is asked of it.
"""
from __future__ import annotations

import difflib
import html
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import chapters as _chapters
from . import plots, results, runner, tuning
from .backends import backend_info, resolve_backend
from .errors import PmppError
from .source import resolve

ROOFS = {"copy_gbs": "copy bandwidth", "read_gbs": "read bandwidth", "fp32_gflops": "FP32 rate"}


class NoisyMeasurement(PmppError):
    """A claim was asked of a recorded row whose repeats disagreed."""


def short_name(device: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"H100"``, ``"NVIDIA GeForce RTX 4090"`` -> ``"RTX 4090"``."""
    name = re.sub(r"^NVIDIA\s+(GeForce\s+)?", "", device.strip())
    found = re.match(r"^((?:RTX|GTX)\s+\w+|[A-Z]+\d+\w*)", name)
    return found.group(1) if found else name


class Lab:
    """A chapter's recordings on every GPU (newest first on each), and this machine's backend."""

    def __init__(self, chapter: Any, *, key: str | None = None, directory: Any = None):
        self.chapter = _chapters.get(chapter) if isinstance(chapter, str) else chapter
        self.key = key or self.chapter.name
        self.backend = resolve_backend("auto")
        runs: dict[str, list[dict]] = {}
        tuned: dict[str, list[dict]] = {}
        for run in sorted(results.recorded(directory=directory), key=lambda r: r["date"]):
            keys = [k for k in run["chapters"] if k == self.chapter.name or k.startswith(self.chapter.name + ":")]
            if keys:
                as_defined = all(tuning.as_defined(self.chapter, e) for k in keys for e in run["chapters"][k])
                (runs if as_defined else tuned).setdefault(short_name(run["device"]["name"]), []).insert(0, run)
        self.runs = runs                  # the variants as the workbook defines them: what the text is about
        self.tuned_runs = tuned           # runs with tuned configurations (pmpp tune), newest first
        self.gpus = list(runs)            # in the order each GPU was first recorded

    def __repr__(self) -> str:
        return f"Lab({self.chapter.name!r}: recorded on {', '.join(self.gpus) or 'no GPU'}; running on {self.backend})"

    def describe(self) -> None:
        """Print where kernels run here and which recordings the notebook reads."""
        print(backend_info())
        for gpu in self.gpus:
            print(f"{gpu}: {results.label(self.runs[gpu][0])}")

    # -- the recordings -------------------------------------------------------------------------

    def recording(self, gpu: str, *names: str, key: str | None = None) -> dict:
        """The newest run on ``gpu`` whose ``key`` (default: the chapter's own problem) has every
        one of ``names``. Runs whose variants were built with tuned configurations
        (:mod:`pmpp.tuning`) are not among them: the text is about the variants as defined."""
        key = key or self.key
        for run in self.runs.get(gpu, []):
            have = {e["name"] for e in run["chapters"].get(key, ())}
            if set(names) <= have and have:
                return run
        raise KeyError(f"no recording on the {gpu} has {', '.join(names) or key} under {key!r}; "
                       f"recorded GPUs: {', '.join(self.gpus) or 'none'} (pmpp bench records one)")

    def rows(self, gpu: str, *names: str, key: str | None = None) -> dict[str, dict]:
        """Name -> entry of :meth:`recording`."""
        return {e["name"]: e for e in self.recording(gpu, *names, key=key)["chapters"][key or self.key]}

    def entry(self, name: str, gpu: str, *, key: str | None = None) -> dict:
        return self.rows(gpu, name, key=key)[name]

    def has(self, gpu: str, *names: str, key: str | None = None) -> bool:
        try:
            self.recording(gpu, *names, key=key)
        except KeyError:
            return False
        return True

    def time(self, name: str, gpu: str, *, key: str | None = None) -> float:
        """The recorded median in µs; :class:`NoisyMeasurement` if the row is noisy."""
        return _steady(self.entry(name, gpu, key=key), gpu)["median_us"]

    def speedup(self, slow: str, fast: str, gpu: str, *, key: str | None = None) -> float:
        """How many times faster ``fast`` ran than ``slow`` on ``gpu``, in one run."""
        rows = self.rows(gpu, slow, fast, key=key)
        return _steady(rows[slow], gpu)["median_us"] / _steady(rows[fast], gpu)["median_us"]

    def ceilings(self, gpu: str, *names: str, key: str | None = None) -> dict:
        """The measured ceilings of :meth:`recording` (with no names: of the newest run)."""
        return self.recording(gpu, *names, key=key)["ceilings"] if names else self.runs[gpu][0]["ceilings"]

    def label(self, gpu: str, *names: str, key: str | None = None) -> str:
        return results.label(self.recording(gpu, *names, key=key))

    def step(self, old: str, new: str, *, key: str | None = None, roof: str | None = None,
             bytes: float | None = None) -> dict[str, float]:
        """Print, for every GPU that recorded both, ``old``'s and ``new``'s times and the speedup
        (and, with ``roof``, ``new``'s share of that GPU's roof); return GPU -> speedup."""
        found = {}
        for gpu in self.gpus:
            if not self.has(gpu, old, new, key=key):
                print(f"{gpu}: not recorded")
                continue
            rows = self.rows(gpu, old, new, key=key)
            try:
                found[gpu] = self.speedup(old, new, gpu, key=key)
            except NoisyMeasurement as noise:
                print(f"{gpu}: {noise}")
                continue
            share = f" ({self.roof_share(new, gpu, roof, bytes=bytes, key=key):.0%} of its {ROOFS[roof]})" if roof else ""
            print(f"{gpu}: {old} {rows[old]['median_us']:,.0f} µs -> {new} {rows[new]['median_us']:,.0f} µs, "
                  f"{found[gpu]:.2f}x{share}")
        return found

    def roof_share(self, name: str, gpu: str, roof: str = "copy_gbs", *, bytes: float | None = None,
                   key: str | None = None, at: str = "median_us") -> float:
        """The time floor over the recorded time: ``bytes`` (default: the row's own model bytes;
        for the compute roof ``"fp32_gflops"``, its flops) at ``gpu``'s measured ``roof`` over its
        ``at`` time (median; q1/q3 for spreads)."""
        run = self.recording(gpu, name, key=key)          # the row's own run: its time against its ceilings
        e = {x["name"]: x for x in run["chapters"][key or self.key]}[name]
        rate = "gflops" if roof == "fp32_gflops" else "gbps"
        per_us = bytes / (e[at] * 1e3) if bytes is not None else e[rate] * e["median_us"] / e[at]
        return per_us / run["ceilings"][roof]

    # -- this machine ---------------------------------------------------------------------------

    def check(self, name: str, *, check: bool = False, **problem: Any):
        """Run ``name`` once on fresh random inputs on this machine's backend (the chapter's CPU
        size, updated by ``problem``) and check it against the reference; print and return it."""
        variant = self.chapter.variant(name)
        result = runner.verify(self.chapter, variant, {**self.chapter.problems["cpu"], **problem}, check=check)
        where = "the CPU engine, checked for races and bounds" if check else self.backend
        print(f"{variant.name} on {where}: {result.detail}")
        return result

    def source(self, name: str) -> None:
        print(resolve(self.chapter.kernel_path(self.chapter.variant(name))).read_text())

    def code(self, name: str) -> list[str]:
        """A kernel file's lines without its header comment (the lines before the first code line)."""
        lines = resolve(self.chapter.kernel_path(self.chapter.variant(name))).read_text().splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("//")), 0)
        return lines[first:]

    def diff(self, old: str, new: str, context: int = 1) -> None:
        """Print the code lines of ``new`` that differ from ``old`` (headers left out)."""
        old_name, new_name = self.chapter.variant(old).name, self.chapter.variant(new).name
        print("\n".join(difflib.unified_diff(self.code(old), self.code(new), old_name, new_name,
                                             n=context, lineterm="")))

    def sass(self, name: str, arch: str = "sm_90") -> str | None:
        """The SASS of a variant for ``arch``, or None (saying why) where nvcc or cuobjdump is missing."""
        from .compilecheck import sass
        from .errors import BackendUnavailableError
        variant = self.chapter.variant(name)
        try:
            return sass(self.chapter.kernel_path(variant), defines=variant.defines,
                        name_expressions=variant.name_expressions, arch=arch)
        except BackendUnavailableError as error:
            print(error)
            return None

    def measure_here(self, names: Sequence[str]) -> list[dict]:
        """Check and time ``names`` on this machine's backend; print the table and what it means. On
        the CPU engine, each variant's predicted GPU time too, and in a notebook the figure of the
        predictions beside the recorded times (:meth:`predicted_bars`)."""
        live = runner.measure(self.chapter, variants=tuning.for_this_gpu(self.chapter, names, self.backend))
        if self.backend == "cpu":
            from .profiling.predict import add_predictions
            print("On the CPU engine: these are CPU times of the CPU size; they check the kernels run and "
                  "say nothing about a GPU. " + add_predictions(self.chapter, live))
        else:
            print(f"Measured live on this GPU ({tuning.current_gpu()}):")
            tuned = tuning.describe(self.chapter, [self.chapter.variant(n) for n in names], tuning.current_gpu())
            if tuned:
                print(tuned)
        print(runner.format_table(live))
        if self.backend == "cpu" and self.gpus:
            _display(self.predicted_bars(names))
        return live

    # -- both GPUs at once ----------------------------------------------------------------------

    def table(self, names: Sequence[str], *, roof: str = "copy_gbs", library: str | None = None,
              bytes: float | None = None, key: str | None = None) -> "Table":
        """One row per name: on each GPU the median (quartiles), the share of that GPU's roof and,
        with ``library``, the library's time over the row's (above 1: faster than the library)."""
        rows = []
        for name in names:
            row = {"name": name}
            for gpu in self.gpus:
                if not self.has(gpu, name, key=key):
                    row[gpu] = None
                    continue
                e = self.entry(name, gpu, key=key)
                cell = {"us": e["median_us"], "q1": e.get("q1_us"), "q3": e.get("q3_us"),
                        "roof": self.roof_share(name, gpu, roof, bytes=bytes, key=key),
                        "noisy": results.noisy(e), "vs": None}
                if library and self.has(gpu, name, library, key=key):
                    cell["vs"] = self.rows(gpu, name, library, key=key)[library]["median_us"] / e["median_us"]
                row[gpu] = cell
            rows.append(row)
        return Table(rows, self.gpus, ROOFS.get(roof, roof), library)

    def roof_bars(self, names: Sequence[str], *, roof: str = "copy_gbs", bytes: float | None = None,
                  goal: float | None = None, goal_label: str = "goal", title: str | None = None,
                  key: str | None = None):
        """:func:`pmpp.plots.roof_bars` of ``names`` on every recorded GPU."""
        percents, spreads, noisy = {}, {}, {}
        for gpu in self.gpus:
            percents[gpu], spreads[gpu], noisy[gpu] = [], [], []
            for name in names:
                if not self.has(gpu, name, key=key):
                    percents[gpu].append(None), spreads[gpu].append(None), noisy[gpu].append(False)
                    continue
                e = self.entry(name, gpu, key=key)
                share = lambda at: 100 * self.roof_share(name, gpu, roof, bytes=bytes, key=key, at=at)
                percents[gpu].append(share("median_us"))
                spreads[gpu].append((share("q3_us"), share("q1_us")) if e.get("q1_us") else None)
                noisy[gpu].append(results.noisy(e))
        library = [lib.name for lib in self.chapter.library]
        labels = "; ".join(f"{gpu}: {self.runs[gpu][0]['date'][:10]}" for gpu in self.gpus)
        return plots.roof_bars(list(names), percents, spreads=spreads, noisy=noisy, library=library,
                               roof=ROOFS.get(roof, roof), goal=goal, goal_label=goal_label,
                               title=title or f"{self.chapter.title}: each GPU against its own roof",
                               label=f"recorded with pmpp bench ({labels})")

    def predicted_bars(self, names: Sequence[str], *, key: str | None = None):
        """:func:`pmpp.plots.predicted_bars`: on every recorded GPU, each name's recorded time beside
        the time the model predicts for it from the CPU engine's counts (pmpp.predict), the variant
        built as that GPU's recording built it. Names the engine cannot count get no predicted bar."""
        from .profiling.predict import predict_variant_or_none
        recorded, predicted = {}, {}
        for gpu in self.gpus:
            recorded[gpu], predicted[gpu] = [], []
            for name in names:
                e = self.entry(name, gpu, key=key) if self.has(gpu, name, key=key) else None
                recorded[gpu].append(e["median_us"] if e else None)
                variant = self._as_recorded(name, e)
                p = predict_variant_or_none(self.chapter, variant, short_name(gpu)) if variant else None
                predicted[gpu].append(p.time_us if p else None)
        labels = "; ".join(f"{gpu}: {self.runs[gpu][0]['date'][:10]}" for gpu in self.gpus)
        return plots.predicted_bars(list(names), recorded, predicted,
                                    title=f"{self.chapter.title}: recorded and predicted at the GPU size",
                                    label=f"recorded with pmpp bench ({labels}); predicted: pmpp.predict, "
                                          "docs/predicted.md")

    def _as_recorded(self, name: str, entry: Mapping[str, Any] | None):
        """The variant ``name`` built as ``entry`` (a recorded row) says, or None for a library routine
        or a variant only a GPU runs."""
        try:
            variant = tuning.as_recorded(self.chapter, entry or {"name": name})
        except KeyError:
            return None
        return None if variant.gpu_only else variant

    def sweep(self, key: str, *, parameter: str, title: str | None = None, library: str | None = None):
        """:func:`pmpp.plots.sweep` of a recorded parameter sweep (a bench set of configured
        variants, named ``"<variant> PARAMETER=value"``) on every GPU that recorded it."""
        settings: list[str] = []
        for gpu in self.gpus:
            if self.has(gpu, key=key):
                for e in self.recording(gpu, key=key)["chapters"][key]:
                    found = re.search(rf"\b{parameter}=(\S+)", e["name"])
                    if found and found.group(1) not in settings:
                        settings.append(found.group(1))
        times, spreads, bars = {}, {}, {}
        for gpu in self.gpus:
            if not self.has(gpu, key=key):
                continue
            by_setting = {re.search(rf"\b{parameter}=(\S+)", e["name"]).group(1): e
                          for e in self.recording(gpu, key=key)["chapters"][key] if f"{parameter}=" in e["name"]}
            times[gpu] = [by_setting[s]["median_us"] if s in by_setting else None for s in settings]
            spreads[gpu] = [(by_setting[s]["q1_us"], by_setting[s]["q3_us"])
                            if s in by_setting and by_setting[s].get("q1_us") else None for s in settings]
            if library:
                bars[gpu] = (library, self.entry(library, gpu, key=key)["median_us"])
        return plots.sweep(settings, times, spreads=spreads, bars=bars, xlabel=parameter,
                           title=title or f"{self.chapter.title}: {parameter}",
                           label="; ".join(self.label(gpu, key=key) for gpu in times))

    def stalls(self, name: str, gpu: str) -> dict | None:
        """Nsight Compute's figures for the longest kernel of ``name`` on ``gpu``
        (``pmpp profile --stalls``), by metric name; None where not recorded."""
        from .profiling.ncu import recorded_stalls
        for data in recorded_stalls(self.chapter.name):
            if short_name(data["device"]["name"]) == gpu:
                for row in data["chapters"][self.chapter.name]["rows"]:
                    if row["name"] == name:
                        longest = max(row["kernels"], key=lambda k: k["metrics"].get("gpu__time_duration.sum", 0))
                        return {"kernel": longest["kernel"], **longest["metrics"]}
        return None


def _display(figure) -> None:
    """Show ``figure`` where a notebook runs this (IPython's display); elsewhere nothing."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(figure)


def mnemonics(listing: str) -> list[str]:
    """The instructions of a SASS listing in order, without predicates and operands
    (``"@P0 LDG.E R4, desc[UR4][R2.64] ;"`` -> ``"LDG.E"``)."""
    found = []
    for line in listing.splitlines():
        tokens = line.split()
        if len(tokens) > 1 and tokens[0].startswith("/*") and tokens[0].endswith("*/"):
            found.append((tokens[2] if tokens[1].startswith("@") and len(tokens) > 2 else tokens[1]).rstrip(";"))
    return found


def _steady(entry: Mapping[str, Any], gpu: str) -> Mapping[str, Any]:
    if results.noisy(entry):
        raise NoisyMeasurement(f"the recorded time of {entry['name']} on the {gpu} is noisy (median "
                               f"{entry['median_us']:,.1f} µs, fastest repeat {entry['min_us']:,.1f} µs): "
                               "no claim rests on it; pmpp bench measures it again")
    return entry


class Table:
    """Rows of :meth:`Lab.table`: HTML in a notebook, aligned text in a terminal."""

    def __init__(self, rows: list[dict], gpus: Sequence[str], roof: str, library: str | None):
        self.rows, self.gpus, self.roof, self.library = rows, list(gpus), roof, library

    def __getitem__(self, name: str) -> dict:
        return next(row for row in self.rows if row["name"] == name)

    def _header(self) -> list[str]:
        cells = ["variant"]
        for gpu in self.gpus:
            cells += [f"{gpu} µs (quartiles)", f"{gpu} % of {self.roof}"]
            if self.library:
                cells.append(f"{gpu} x {self.library}")
        return cells

    def _cells(self, row: dict) -> list[str]:
        cells = [row["name"]]
        for gpu in self.gpus:
            cell = row.get(gpu)
            if cell is None:
                cells += ["not recorded", ""] + ([""] if self.library else [])
                continue
            spread = f" ({cell['q1']:,.1f}-{cell['q3']:,.1f})" if cell["q1"] is not None else ""
            cells += [f"{cell['us']:,.1f}{spread}" + (" noisy" if cell["noisy"] else ""), f"{cell['roof']:.0%}"]
            if self.library:
                cells.append(f"{cell['vs']:.2f}x" if cell["vs"] is not None else "")
        return cells

    def __str__(self) -> str:
        table = [self._header()] + [self._cells(row) for row in self.rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in table)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self._header())
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in self._cells(row)) + "</tr>"
                       for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        return str(self)
