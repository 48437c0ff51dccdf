"""pmpp.explain: a chapter's variants counted side by side, and their bytes three ways."""
import pytest

from pmpp import chapters
from pmpp.profiling import explain, ncu, validate

REDUCTION = chapters.get("reduction")


@pytest.fixture(scope="module")
def table():
    return explain.chapter_table(REDUCTION, ["01_simple", "07_reduce1", "08_reduce2", "15_vectorized"])


def test_the_table_tells_the_variants_apart(table):
    rows = {r["variant"]: r for r in table}
    assert rows["07_reduce1"]["bank_conflicts"] > 0 == rows["08_reduce2"]["bank_conflicts"]
    assert rows["01_simple"]["active_lanes"] < rows["08_reduce2"]["active_lanes"]
    assert rows["15_vectorized"]["ld_ideal"] == 16 and rows["15_vectorized"]["ld_sectors_per_request"] > 15.9
    assert rows["08_reduce2"]["ld_ideal"] == 4


def test_the_table_prints_and_shows_as_html(table):
    text = str(table)
    assert text.splitlines()[0].startswith("variant") and "16.0/16" in text
    html = table._repr_html_()
    assert html.count("<tr>") == 1 + len(table) and "occ. T4" in html


def test_bytes_three_ways_put_in_place_rereads_above_the_model():
    rows = {r["variant"]: r for r in explain.traffic(REDUCTION, ["01_simple", "03_shared_memory"])}
    simple, shared = rows["01_simple"], rows["03_shared_memory"]
    assert simple["requested_bytes"] > 5 * simple["model_bytes"]
    assert shared["model_bytes"] <= shared["requested_bytes"] < 1.05 * shared["model_bytes"]
    assert simple["dram_bytes"] == pytest.approx(simple["model_bytes"], rel=0.05)   # recorded on the H100
    assert simple["requested_intensity"] == pytest.approx(simple["flops"] / simple["requested_bytes"])


def test_the_recorded_gpu_counts_come_under_the_engines_names():
    gpu = validate.recorded_counters("reduction", "07_reduce1")
    assert gpu["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] > gpu["smsp__sass_inst_executed_op_shared_ld.sum"]
    with pytest.raises(KeyError, match="no reduction 99_none"):
        validate.recorded_counters("reduction", "99_none")
    assert "Nsight Compute on NVIDIA H100" in ncu.label("reduction")


@pytest.mark.parametrize("chapter_name, variant", [("reduction", "16_one_pass"), ("histogram", "04_private_shared"),
                                                   ("scan", "10_pipelined_lookback"), ("stencil", "06_vectorized")])
def test_a_counted_run_gives_the_right_answer(chapter_name, variant):
    """Counting must not change results: the count build's output checks out against NumPy."""
    import numpy as np
    from pmpp import runner
    from pmpp.counters import counting_module
    chapter = chapters.get(chapter_name)
    v = chapter.variant(variant)
    problem = runner.problem_for(v, chapter.problems["cpu"])
    inputs = chapter.make_inputs(problem, np, np.random.default_rng())
    module = counting_module(runner.load_variant(chapter, v, backend="cpu"))
    output = v.launch(module, problem, inputs)
    assert chapter.check(output, chapter.reference(problem, inputs), problem).ok
    assert module.launches, "the launch was counted"
