"""Per-GPU tuning: each variant's compile-time parameters searched on the GPU in hand, the best
configuration recorded for that GPU model, and used there — never on another GPU.

A variant declares what may be tuned (``Variant.tunables``: each parameter's legal values, its
default among them; ``Variant.legal``: which combinations are legal). ``pmpp tune`` searches that
space on a GPU (:func:`tune_variant`): every candidate is first checked for correctness at the
chapter's awkward sizes and at full size, then timed as ``pmpp bench`` times; the whole space where
it is small (:data:`EXHAUSTIVE`), else one parameter at a time from the default until no move helps
(:func:`coordinate_search`). The recording, ``results/tuned/<gpu>.json``, keeps per variant the best
configuration, its time, the default's time measured in the same search, and the runner-up's
margin. ``pmpp run``, ``pmpp bench`` and the notebooks build a variant with the configuration
recorded for the GPU they run on (:func:`tuned_variant`), and say so; a results row keeps the
configuration it was built with (``"config"``).
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .chapters.base import Chapter, Variant

EXHAUSTIVE = 48          # a space this small is searched whole
MAX_CANDIDATES = 64      # a larger one: at most this many candidates timed
TUNED_DIR = "tuned"


# ---------------------------------------------------------------------------------------------
# The space and the search

def space(variant: Variant) -> list[dict]:
    """Every legal configuration of ``variant``'s tunables (the default first)."""
    if not variant.tunables:
        return []
    names = list(variant.tunables)
    default = variant.config()
    every = [dict(zip(names, values)) for values in itertools.product(*(variant.tunables[n] for n in names))]
    legal = [c for c in every if variant.legal is None or variant.legal({**variant.defines, **c})]
    if default not in legal:
        raise ValueError(f"{variant.name}: its default configuration {default} is not among its legal tunables")
    return [default] + [c for c in legal if c != default]


def coordinate_search(variant: Variant, time_of: Callable[[dict], float | None],
                      limit: int = MAX_CANDIDATES) -> list[tuple[dict, float | None]]:
    """From the default, move one parameter at a time to its fastest legal value while that helps,
    at most ``limit`` candidates timed. ``time_of(config)``: its time, or None where it is wrong or
    does not build. Returns every (config, time) tried, in the order tried."""
    legal = space(variant)
    tried: dict[str, tuple[dict, float | None]] = {}

    def measured(config):
        key = json.dumps(config, sort_keys=True)
        if key not in tried and len(tried) < limit:
            tried[key] = (config, time_of(config))
        return tried.get(key, (config, None))[1]

    best = legal[0]
    best_time = measured(best)
    moved = True
    while moved and len(tried) < limit:
        moved = False
        for name in variant.tunables:
            for value in variant.tunables[name]:
                candidate = {**best, name: value}
                if candidate not in legal:
                    continue
                t = measured(candidate)
                if t is not None and (best_time is None or t < best_time):
                    best, best_time, moved = candidate, t, True
    return list(tried.values())


def search(variant: Variant, time_of: Callable[[dict], float | None]) -> list[tuple[dict, float | None]]:
    """Every legal configuration where there are at most :data:`EXHAUSTIVE`, else
    :func:`coordinate_search`: (config, time or None) per candidate tried."""
    legal = space(variant)
    if len(legal) <= EXHAUSTIVE:
        return [(config, time_of(config)) for config in legal]
    return coordinate_search(variant, time_of)


def summary(variant: Variant, tried: Sequence[tuple[dict, float | None]]) -> dict:
    """The recording of one variant's search: the best configuration, the runner-up's margin
    (its time over the best's), the default's time and what was rejected."""
    timed = sorted(((c, t) for c, t in tried if t is not None), key=lambda ct: ct[1])
    if not timed:
        raise ValueError(f"{variant.name}: no configuration ran correctly")
    (best, best_us), runner_up = timed[0], timed[1] if len(timed) > 1 else None
    default = variant.config()
    default_us = next((t for c, t in tried if c == default), None)
    return {"config": best, "median_us": best_us, "default": default, "default_us": default_us,
            "runner_up": runner_up[0] if runner_up else None,
            "runner_up_margin": runner_up[1] / best_us if runner_up else None,
            "candidates": len(tried), "rejected": [c for c, t in tried if t is None]}


# ---------------------------------------------------------------------------------------------
# On the GPU

def tune_variant(chapter: Chapter, variant: Variant, problem: Mapping[str, Any] | None = None,
                 *, progress=None, backend: str = "cupy") -> dict:
    """Search ``variant``'s tunables on the current GPU (:func:`search`) and return its
    :func:`summary`. A candidate counts only if it is right at every awkward size of the chapter
    and at full size (the check ``pmpp bench`` applies) before it is timed. (``backend="cpu"``
    runs the same search on the CPU engine: its times say nothing of a GPU.)"""
    from . import runner
    from .errors import PmppError
    problem = dict(problem or runner.default_problem(chapter, backend))

    def time_of(config):
        candidate = variant.with_defines(**config)
        label = f"{chapter.name}/{variant.name} " + " ".join(f"{k}={v}" for k, v in config.items())
        if progress is not None:
            progress.note(label)
        try:
            for n in chapter.test_sizes:
                small = runner.problem_for(candidate, {**problem, "n": n}) if "n" in problem else problem
                if not runner.verify(chapter, candidate, small, backend=backend).ok:
                    return None
            entry = runner.measure(chapter, backend=backend, problem=problem, variants=[candidate], library=False)[0]
        except (PmppError, ValueError, RuntimeError):
            return None      # does not build or cannot run this configuration: not a candidate
        unsteady = entry.get("noisy") and backend == "cupy"      # still noisy after its retakes: no time to trust
        return entry["median_us"] if entry["correct"] and not unsteady else None

    return summary(variant, search(variant, time_of))


# ---------------------------------------------------------------------------------------------
# The recording

def recording_path(device_name: str, directory: str | os.PathLike | None = None) -> Path:
    """``results/tuned/<gpu>.json``: one file per GPU model."""
    from .results import RESULTS_DIR, device_slug
    return Path(directory or RESULTS_DIR / TUNED_DIR) / f"{device_slug(device_name)}.json"


def write(path: str | os.PathLike, key: str, found: Mapping[str, Any], *, device: Mapping[str, Any],
          software: Mapping[str, Any], commit: str) -> Path:
    """Put one variant's tuning (``key``: ``"chapter/variant"``) into the GPU's recording; the
    variants already in it are kept."""
    path = Path(path)
    old = load(path) if path.exists() else None
    if old is not None and old["device"]["name"] != device["name"]:
        raise ValueError(f"{path} holds tunings for {old['device']['name']}, not {device['name']}")
    variants = dict(old["variants"]) if old else {}
    variants[key] = {**found, "commit": commit}
    data = {"device": dict(device), "versions": dict(software),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "variants": dict(sorted(variants.items()))}
    validate(data, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def load(path: str | os.PathLike) -> dict:
    data = json.loads(Path(path).read_text())
    validate(data, path)
    return data


def validate(data: Any, where: Any = "<tuning>") -> None:
    """Raise ValueError unless ``data`` is a tuning recording."""
    for key in ("device", "versions", "date", "commit", "variants"):
        if key not in data:
            raise ValueError(f"{where}: missing {key!r}")
    for key, found in data["variants"].items():
        if not isinstance(found.get("config"), dict) or not found.get("median_us", 0) > 0:
            raise ValueError(f"{where}: {key} has no configuration with a time")


def recorded(device_name: str, directory: str | os.PathLike | None = None) -> dict | None:
    """The tuning recorded for ``device_name`` (that GPU model only), or None."""
    path = recording_path(device_name, directory)
    data = load(path) if path.exists() else None
    return data if data is not None and data["device"]["name"] == device_name else None


def tuned_variant(chapter: Chapter, variant: Variant, device_name: str | None,
                  directory: str | os.PathLike | None = None) -> Variant:
    """``variant`` built with the configuration recorded for ``device_name`` (None, or a GPU with
    no recording for it: the variant as it is)."""
    data = recorded(device_name, directory) if device_name else None
    found = data and data["variants"].get(f"{chapter.name}/{variant.name}")
    if not found:
        return variant
    config = {k: v for k, v in found["config"].items() if k in variant.tunables}
    return variant.with_defines(**config)


def for_this_gpu(chapter: Chapter, variants: Iterable[Any], backend: str) -> list[Variant]:
    """``variants`` (names or variants) as a run on ``backend`` builds them: on a GPU with a tuning
    recorded for it, each with its tuned configuration; else as defined."""
    chosen = [chapter.variant(v) if isinstance(v, str) else v for v in variants]
    gpu = current_gpu() if backend == "cupy" else None
    return [tuned_variant(chapter, v, gpu) for v in chosen] if gpu else chosen


def describe(chapter: Chapter, variants: Iterable[Variant], device_name: str | None) -> str | None:
    """One line saying which tuned configurations a run on ``device_name`` uses, or None."""
    used = []
    for variant in variants:
        tuned = tuned_variant(chapter, variant, device_name)
        if tuned is not variant and tuned.config() != variant.config():
            used.append(f"{variant.name} " + " ".join(f"{k}={v}" for k, v in tuned.config().items()))
    if not used:
        return None
    return f"tuned for the {device_name} (results/{TUNED_DIR}/{recording_path(device_name).name}): " + "; ".join(used)


def as_defined(chapter: Chapter, entry: Mapping[str, Any]) -> bool:
    """Whether a results row is of a variant as the workbook defines it (its default configuration),
    or of a library routine, or of a sweep that names its own configuration; False for a row that
    ``pmpp tune``'s configuration built."""
    if "config" not in entry or entry["kind"] != "variant":
        return True
    try:
        return entry["config"] == chapter.variant(entry["name"]).config()
    except KeyError:
        return True


def as_recorded(chapter: Chapter, entry: Mapping[str, Any]) -> Variant:
    """The variant a results row was built as: with the configuration the row keeps, where that is
    not the variant's own. Raises KeyError for a name the chapter no longer has."""
    variant = chapter.variant(entry["name"])
    config = entry.get("config")
    return variant.with_defines(**config) if config and config != variant.config() else variant


def run_as_defined(run: Mapping[str, Any]) -> bool:
    """Whether every row of a recorded run is :func:`as_defined`."""
    from . import chapters
    return all(as_defined(chapters.get(key.split(":")[0]), e) for key, entries in run["chapters"].items()
               for e in entries)


def current_gpu() -> str | None:
    """The current GPU's name as the recordings name it, or None without one."""
    from .backends import gpu_available
    if not gpu_available():
        return None
    from .results import device_info
    return _gpu_name_cache.setdefault("name", device_info("cupy")["name"])


_gpu_name_cache: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------
# The report: each variant's tuned configuration beside the workbook's

REPORT = Path("docs") / "tuned.md"


def report(directory: str | os.PathLike | None = None) -> str:
    """docs/tuned.md: per recorded GPU, each tuned variant as the workbook defines it and as tuned,
    with both times from the same search: how much of a gap is the constants, not the algorithm."""
    from . import chapters
    from .results import RESULTS_DIR
    lines = ["# Tuned configurations, beside the workbook's",
             "",
             "Written by `python -m pmpp.tuning` from `results/tuned/` (`pmpp tune` on each GPU). Both "
             "times of a row come from one search on that GPU: the variant as the workbook defines it and "
             "with the fastest configuration found, each checked at the chapter's awkward sizes and at full "
             "size first. The runner-up's margin says how clear the choice was; a margin of a few percent "
             "is within run-to-run noise."]
    for path in sorted(Path(directory or RESULTS_DIR / TUNED_DIR).glob("*.json")):
        data = load(path)
        lines += ["", f"## {data['device']['name']}", "",
                  f"Searched at commits {', '.join(sorted({f['commit'][:7] for f in data['variants'].values()}))}.",
                  "", "| variant | from | as defined | tuned | speedup | runner-up | tried (of legal) |",
                  "|---|---|---|---|---|---|---|"]
        for key, found in data["variants"].items():
            chapter_name, name = key.split("/", 1)
            variant = chapters.get(chapter_name).variant(name)
            same = found["config"] == found["default"]
            lines.append(
                f"| {key} | {variant.source} | {_config_text(found['default'])} {found['default_us']:.1f} us | "
                f"{'(as defined)' if same else _config_text(found['config'])} {found['median_us']:.1f} us | "
                f"{found['default_us'] / found['median_us']:.2f}x | "
                + (f"+{(found['runner_up_margin'] - 1) * 100:.1f}%" if found.get("runner_up") else "none")
                + f" | {found['candidates']} ({len(space(variant))}) |")
    return "\n".join(lines) + "\n"


def _config_text(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    (root / REPORT).write_text(report())
    print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()
