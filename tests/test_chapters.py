"""The chapter contract: what every chapter's data promises, checked for all of them from that data
(pmpp.chapters.base.Chapter). The every-variant matrix comes from each chapter's ``cases``: every
variant that is not a teaching example of a bug, on each of its awkward problems, must match the
reference on fresh random inputs - on the CPU engine with the race, bounds and barrier checks on,
and on a GPU at the GPU size too. Pairs a backend cannot run are not collected."""
import pytest

from pmpp import chapters, runner
from pmpp.chapters import histogram
from pmpp.source import kernels_dir

CHAPTERS = [chapters.get(name) for name in chapters.names()]


def _matrix():
    for chapter in CHAPTERS:
        for backend in ("cpu", "cupy"):
            marks = [pytest.mark.gpu] if backend == "cupy" else []
            for variant, problem in chapter.cases(backend):
                label = f"{chapter.name}-{variant.name}-{chapter.describe(problem)}-{backend}"
                yield pytest.param(chapter, variant, problem, backend, marks=marks, id=label)


@pytest.mark.parametrize("chapter, variant, problem, backend", list(_matrix()))
def test_every_variant_matches_the_reference_on_random_inputs(chapter, variant, problem, backend, seed):
    result = runner.verify(chapter, variant, problem, backend=backend, seed=seed, check=backend == "cpu")
    assert result, f"{chapter.name}/{variant.name}, {chapter.describe(problem)}, seed={seed}: {result.detail}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_every_variant_has_a_kernel_file_numbered_in_order(chapter):
    names = [v.name for v in chapter.variants]
    assert [int(name.split("_", 1)[0]) for name in names] == list(range(1, len(names) + 1))
    assert sorted(p.stem for p in (kernels_dir() / chapter.kernel_dir).glob("*.cu")) == sorted(names)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_every_variant_is_in_the_matrix_on_the_cpu_engine_or_only_a_gpu_runs_it(chapter):
    on_cpu = {v.name for v, _ in chapter.cases("cpu")}
    own_tests = set(histogram.DOT_VARIANTS) if chapter is histogram.CHAPTER else set()   # the dot products'
    for variant in chapter.variants:
        assert variant.name in on_cpu | own_tests or variant.gpu_only or variant.racy, \
            f"{chapter.name}/{variant.name} is in no case of the matrix"


def test_the_largest_size_runs_on_the_cpu_engine_only_for_the_variants_named():
    reduction = chapters.get("reduction")
    largest = max(reduction.test_sizes)
    at_largest = {v.name for v, p in reduction.cases("cpu") if p["n"] == largest}
    assert at_largest == set(reduction.cpu_largest)
    assert {v.name for v, p in reduction.cases("cupy") if p["n"] == largest} > at_largest
