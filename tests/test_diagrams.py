"""pmpp.diagrams: pictures of one recorded warp instruction say what the counters count."""
import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import pmpp
from pmpp import diagrams
from pmpp.profiling import ncu

from counter_cases import CASES, KERNEL_FILE


@pytest.fixture(scope="module")
def counted():
    module = pmpp.load(source=KERNEL_FILE.read_text(), filename=KERNEL_FILE.name, backend="cpu")

    def count(name):
        case = next(c for c in CASES if c["name"] == name)
        return pmpp.counters(module.get_function(case["kernel"]), tuple(case["grid"]), tuple(case["block"]),
                             ncu.case_arguments(case, np, 0))
    return count


def title(fig):
    return fig.axes[0].get_title()


def test_coalescing_names_the_sectors_a_strided_load_touches(counted):
    sample = counted("strided_load_2").sample("in[i * stride]", space="global", op="ld")
    fig = diagrams.coalescing(sample)
    assert "32 lanes x 4 B touch 8 sectors (ideal 4)" in title(fig)
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("sector")]
    assert labels[0] == "sector 0 (bytes 0-31)" and len(labels) == 8


def test_banks_shows_a_two_way_conflict(counted):
    sample = counted("shared_stride_2").sample(space="shared", op="ld")
    fig = diagrams.banks(sample)
    assert "2-way bank conflict" in title(fig) and "'s'" in title(fig)
    assert sum("2 words" in t.get_text() for t in fig.axes[0].texts) == 16


def test_banks_of_a_broadcast_has_no_conflict(counted):
    fig = diagrams.banks(counted("shared_broadcast").sample(space="shared", op="ld"))
    assert "no bank conflict" in title(fig)


def test_active_lanes_shows_half_the_warp_in_the_loop(counted):
    fig = diagrams.active_lanes(counted("half_warp_loop"), "sum += in[i + k]")
    assert "8 executions, 16.0 active lanes on average" in title(fig)


def test_each_diagram_refuses_the_other_memory_space(counted):
    with pytest.raises(ValueError, match="diagrams.banks"):
        diagrams.coalescing(counted("shared_stride_1").sample(space="shared", op="ld"))
    with pytest.raises(ValueError, match="diagrams.coalescing"):
        diagrams.banks(counted("strided_load_1").sample(space="global", op="ld"))
