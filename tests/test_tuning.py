"""pmpp.tuning: tunables declared per variant, the search, the per-GPU recording, and its use."""
import random
from pathlib import Path

import pytest

from pmpp import chapters, results, runner, tuning
from pmpp.chapters.base import Variant
from pmpp.cli import main

H200 = {"name": "NVIDIA H200", "compute_capability": "9.0"}
SOFTWARE = {"cupy": "14.2.0"}


def toy(**tunables):
    return Variant("05_toy", "toy", "test", launch=None, model=None,
                   defines={"BLOCK_DIM": 256, "COARSE_FACTOR": 4}, tunables=tunables or
                   {"BLOCK_DIM": (128, 256, 512), "COARSE_FACTOR": (1, 2, 4, 8)})


def test_the_space_is_every_legal_combination_the_default_first():
    variant = toy()
    space = tuning.space(variant)
    assert space[0] == {"BLOCK_DIM": 256, "COARSE_FACTOR": 4} and len(space) == 12
    small = Variant("x", "x", "t", None, None, defines={"BLOCK_DIM": 256, "COARSE_FACTOR": 4},
                    tunables=variant.tunables, legal=lambda d: d["BLOCK_DIM"] * d["COARSE_FACTOR"] <= 1024)
    assert all(c["BLOCK_DIM"] * c["COARSE_FACTOR"] <= 1024 for c in tuning.space(small)) and len(tuning.space(small)) == 9
    with pytest.raises(ValueError, match="default configuration"):
        tuning.space(Variant("x", "x", "t", None, None, defines={"BLOCK_DIM": 100}, tunables={"BLOCK_DIM": (128,)}))


def cost(config):
    """A made-up time with one best point (512, 2); the BLOCK_DIM 128 builds are wrong."""
    if config["BLOCK_DIM"] == 128:
        return None
    return 100 + abs(config["BLOCK_DIM"] - 512) / 8 + abs(config["COARSE_FACTOR"] - 2) * 10


def test_a_small_space_is_searched_whole_and_a_wrong_candidate_never_wins():
    tried = tuning.search(toy(), cost)
    assert len(tried) == 12
    found = tuning.summary(toy(), tried)
    assert found["config"] == {"BLOCK_DIM": 512, "COARSE_FACTOR": 2} and found["median_us"] == 100
    assert found["default"] == {"BLOCK_DIM": 256, "COARSE_FACTOR": 4} and found["default_us"] == 100 + 32 + 20
    assert found["runner_up_margin"] == pytest.approx(110 / 100)
    assert len(found["rejected"]) == 4 and all(c["BLOCK_DIM"] == 128 for c in found["rejected"])


def test_a_large_space_is_searched_one_parameter_at_a_time_within_the_limit():
    big = toy(BLOCK_DIM=tuple(range(128, 1025, 32)), COARSE_FACTOR=tuple(range(1, 17)))
    assert len(tuning.space(big)) > tuning.EXHAUSTIVE
    tried = tuning.search(big, cost)
    assert len(tried) <= tuning.MAX_CANDIDATES
    assert tuning.summary(big, tried)["config"] == {"BLOCK_DIM": 512, "COARSE_FACTOR": 2}


def test_no_correct_configuration_is_an_error():
    with pytest.raises(ValueError, match="no configuration ran correctly"):
        tuning.summary(toy(), [({"BLOCK_DIM": 256, "COARSE_FACTOR": 4}, None)])


def test_a_recording_is_for_one_gpu_model_and_never_used_on_another(tmp_path):
    chapter = chapters.get("reduction")
    found = tuning.summary(chapter.variant("05_coarsened"), [({"BLOCK_DIM": 256, "COARSE_FACTOR": 4}, 338.0),
                                                            ({"BLOCK_DIM": 256, "COARSE_FACTOR": 16}, 246.0)])
    path = tuning.write(tuning.recording_path("NVIDIA H200", tmp_path), "reduction/05_coarsened", found,
                        device=H200, software=SOFTWARE, commit="abc1234")
    assert path.name == "nvidia-h200.json"
    tuned = tuning.tuned_variant(chapter, chapter.variant("05_coarsened"), "NVIDIA H200", tmp_path)
    assert tuned.name == "05_coarsened" and tuned.config() == {"BLOCK_DIM": 256, "COARSE_FACTOR": 16}
    assert chapter.kernel_path(tuned) == "reduction/05_coarsened.cu"
    for other in ("NVIDIA H100 80GB HBM3", None):
        assert tuning.tuned_variant(chapter, chapter.variant("05_coarsened"), other, tmp_path).config() == \
            {"BLOCK_DIM": 256, "COARSE_FACTOR": 4}
    untuned = chapter.variant("15_vectorized")
    assert tuning.tuned_variant(chapter, untuned, "NVIDIA H200", tmp_path) is untuned
    with pytest.raises(ValueError, match="holds tunings for NVIDIA H200"):
        tuning.write(path, "reduction/05_coarsened", found, device={"name": "NVIDIA H100 80GB HBM3"},
                     software=SOFTWARE, commit="abc1234")


def test_a_results_row_keeps_the_configuration_it_was_built_with():
    entry = results.make_entry("05_coarsened", "variant", "n=1", _timing(), None, True)
    results.validate({"device": H200, "versions": {}, "date": "2026-11-29T00:00:00+00:00", "commit": "x",
                      "ceilings": {"copy_gbs": 1.0, "fp32_gflops": 1.0},
                      "chapters": {"reduction": [{**entry, "config": {"COARSE_FACTOR": 16}}]}})
    with pytest.raises(ValueError, match="config"):
        results.validate({"device": H200, "versions": {}, "date": "2026-11-29T00:00:00+00:00", "commit": "x",
                          "ceilings": {"copy_gbs": 1.0, "fp32_gflops": 1.0},
                          "chapters": {"reduction": [{**entry, "config": 16}]}})


def _timing():
    from pmpp.timing import CUDA_EVENTS, Timing
    return Timing.from_samples([10.0, 10.1, 10.2], CUDA_EVENTS)


def test_a_cpu_run_measures_the_defaults_and_says_tune_needs_a_gpu(capsys):
    chapter = chapters.get("reduction")
    entry = runner.measure(chapter, backend="cpu", problem={"n": 4096, "op": "sum"}, variants=["05"], library=False)[0]
    assert entry["config"] == {"BLOCK_DIM": 256, "COARSE_FACTOR": 4}
    assert main(["tune", "reduction"]) == 1
    assert "needs one" in capsys.readouterr().err


def test_a_search_checks_every_candidate_before_timing_it(monkeypatch):
    chapter = chapters.get("reduction")
    variant = chapter.variant("14_warp_shuffle")
    checked = []
    real_verify = runner.verify
    monkeypatch.setattr(runner, "verify", lambda ch, v, problem, **kw: checked.append(v.config()) or real_verify(ch, v, problem, **kw))
    found = tuning.tune_variant(chapter, variant, {"n": 4096, "op": "sum"}, backend="cpu")
    assert found["candidates"] == len(tuning.space(variant)) and not found["rejected"]
    assert all(checked.count(c) == len(chapter.test_sizes) for c in tuning.space(variant))
    assert found["config"] in tuning.space(variant) and found["median_us"] > 0


def _covering(legal):
    """The default, then legal configurations chosen greedily until every legal value of every
    parameter has been in one."""
    chosen = [legal[0]]
    uncovered = {item for c in legal for item in c.items()} - set(legal[0].items())
    while uncovered:
        best = max(legal, key=lambda c: len(uncovered & set(c.items())))
        chosen.append(best)
        uncovered -= set(best.items())
    return chosen


def test_the_covering_configurations_hold_every_legal_value():
    legal = [{"A": a, "B": b} for a in (1, 2, 3, 4) for b in (1, 2, 3) if a * b <= 8]
    chosen = _covering(legal)
    assert chosen[0] == legal[0] and len(chosen) < len(legal)
    assert all(any(c[k] == v for c in chosen) for c0 in legal for k, v in c0.items())


def _tunable_variants():
    """Each tunable variant; those that only a GPU runs (10_wgmma_tma) are swept there."""
    return [pytest.param(name, v, marks=[pytest.mark.gpu] if v.gpu_only else [])
            for name in chapters.names() for v in chapters.get(name).variants if v.tunables]


@pytest.mark.slow
@pytest.mark.parametrize("name, variant", _tunable_variants(), ids=lambda x: getattr(x, "name", x))
def test_every_value_of_every_tunable_runs_right_on_the_cpu_engine(name, variant):
    # Every legal value of every parameter in some configuration run (a few configurations that
    # cover them all), and one more legal combination drawn at random (a failure names it).
    # A variant only a GPU runs is swept there, at the same CPU-sized problem.
    chapter = chapters.get(name)
    backend = "cupy" if variant.gpu_only else "cpu"
    legal = tuning.space(variant)
    chosen = _covering(legal) + random.sample(legal, 1)
    problem = {**chapter.problems["cpu"], "n": min(chapter.test_sizes[-1], 100_003)} if "n" in chapter.problems["cpu"] \
        else chapter.problems["cpu"]
    for config in chosen:
        result = runner.verify(chapter, variant.with_defines(**config), runner.problem_for(variant, problem),
                               backend=backend)
        assert result.ok, f"{variant.name} {config}: {result.detail}"


def test_the_tuned_report_is_current_and_shows_each_default_beside_its_tuning():
    root = Path(__file__).resolve().parent.parent
    text = (root / tuning.REPORT).read_text()
    assert text == tuning.report(), "docs/tuned.md is stale: python -m pmpp.tuning"
    assert "| reduction/05_coarsened | PMPP 10.8 | BLOCK_DIM=256 COARSE_FACTOR=4 " in text
