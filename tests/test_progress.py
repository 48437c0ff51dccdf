"""pmpp.progress: a bar on stderr only where someone watches, and draws where the data lives."""
import io

import numpy as np
import pytest

from pmpp import progress
from pmpp.chapters.draw import generator_for


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_only_on_a_terminal_unless_forced(monkeypatch):
    monkeypatch.delenv("PMPP_PROGRESS", raising=False)
    assert not progress.wanted(io.StringIO())          # a notebook's or a test's captured stream
    assert progress.wanted(Terminal())
    monkeypatch.setenv("PMPP_PROGRESS", "0")
    assert not progress.wanted(Terminal())
    monkeypatch.setenv("PMPP_PROGRESS", "1")
    assert progress.wanted(io.StringIO())
    assert isinstance(progress.progress(3, enabled=False), progress.Quiet)


def test_the_bar_draws_on_stderr_and_text_goes_to_stdout(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with progress.progress(2, "run", enabled=True) as bar:
        bar.advance("reduction/01_simple")
        bar.print("a table")
        bar.advance("reduction/02_convergent")
    out, err = capsys.readouterr()
    assert "a table" in out and "reduction" not in out
    assert "reduction/01_simple" in err and "1/2" in err


def test_inputs_for_the_cpu_engine_come_from_the_generator_given():
    rng = np.random.default_rng(5)
    assert generator_for(np, rng) is rng
