"""A progress bar for long commands (``pmpp run``, ``bench``, ``profile``), drawn by tqdm on stderr.

It appears only after :data:`DELAY_S` seconds, only when stderr is a terminal - never in a
notebook's or a test's captured output - unless ``PMPP_PROGRESS=1`` forces it (``0`` turns it
off everywhere). Without tqdm installed there is no bar; nothing else changes.

    with progress(total=40, what="run") as bar:
        bar.advance("reduction/01_simple")          # one step done
        bar.note("reduction/01_simple n=31")        # what is running now, no step
        bar.print(table)                            # stdout, without tearing the bar
"""
from __future__ import annotations

import os
import sys

DELAY_S = 2.0       # work shorter than this shows no bar at all


def wanted(stream=None) -> bool:
    """Whether to draw a bar on ``stream`` (stderr): ``PMPP_PROGRESS`` if set, else whether it is a
    terminal."""
    forced = os.environ.get("PMPP_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress(total: int, what: str = "", *, enabled: bool | None = None):
    """A :class:`Bar` over ``total`` steps, or a :class:`Quiet` one where no bar is wanted."""
    if enabled is None:
        enabled = wanted()
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:
            return Quiet()
        return Bar(tqdm(total=total, desc=what, unit="step", file=sys.stderr, delay=DELAY_S,
                        leave=False, dynamic_ncols=True))
    return Quiet()


class Quiet:
    """No bar: steps are ignored and text is printed as it is."""

    def advance(self, label: str = "") -> None:
        pass

    def note(self, label: str) -> None:
        pass

    def print(self, text: str = "") -> None:
        print(text, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class Bar(Quiet):
    """A tqdm bar: ``advance`` moves it one step, ``note`` names what runs, ``print`` writes text
    above it."""

    def __init__(self, bar):
        self.bar = bar

    def advance(self, label: str = "") -> None:
        if label:
            self.bar.set_postfix_str(label, refresh=False)
        self.bar.update(1)

    def note(self, label: str) -> None:
        self.bar.set_postfix_str(label)

    def print(self, text: str = "") -> None:
        self.bar.write(text, file=sys.stdout)
        sys.stdout.flush()

    def __exit__(self, *exc) -> None:
        self.bar.close()
