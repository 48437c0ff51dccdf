"""Each chapter's check can fail: a kernel wrong in one output element (or one count, or one sum
by 1) fails it — on the CPU engine at the chapter's CPU size and, on a GPU, at its full size, with
the inputs and the judgement that ``pmpp run``/``pmpp bench`` use there (exact on exactly summable
inputs for sums and scans: a rounding tolerance at 2^28 elements would hide this)."""

import numpy as np
import pytest

from pmpp import chapters, runner
from pmpp.source import kernels_dir

# chapter: (variant, text in its kernel, the same with one output made wrong)
WRONG = {
    "convolution": ("01_basic", "P[outRow * width + outCol] = Pvalue;",
                    "P[outRow * width + outCol] = Pvalue + (outRow == height - 1 && outCol == width - 1);"),
    "implicit_gemm": ("01_naive", "output[i] = sum;",
                      "output[i] = sum + (i == N * K * Oh * Ow - 1);"),
    "stencil": ("01_basic", "out[i*N*N + j*N + k] = in[i*N*N + j*N + k];",
                "out[i*N*N + j*N + k] = in[i*N*N + j*N + k] + (i + j + k == 3 * N - 3);"),
    "histogram": ("01_basic", "    if (i < length) {",
                  "    if (i == 0) { atomicAdd(&histo[0], 1u); }\n    if (i < length) {"),
    "reduction": ("03_shared_memory", "output[blockIdx.x] = input_s[0];",
                  "output[blockIdx.x] = input_s[0] + (blockIdx.x == 0);"),
    "scan": ("07_stream_based", "Y[base + k] = previousSum + XY[PADDED(k)];",
             "Y[base + k] = previousSum + XY[PADDED(k)] + T(base + k == n - 1);"),
    "pooling": ("01_naive", "y[i] = m;", "y[i] = m + (i == nc * OT * OH * OW - 1);"),
    "elementwise": ("01_naive", "z[i] = mul(x[i], y[i]);",
                    "z[i] = mul(x[i], i == n - 1 ? x[i] : y[i]);"),
    "upsample": ("01_generic_forward", "y[i] = x[(c * H + ih) * W + iw];",
                 "y[i] = x[(c * H + ih) * W + (i == outputs - 1 ? (iw + 1) % W : iw)];"),
}


def test_every_chapter_has_a_wrong_kernel():
    assert set(WRONG) == set(chapters.names())


def wrong_kernel(tmp_path, chapter, variant):
    _, right, wrong = WRONG[chapter.name]
    text = (kernels_dir() / chapter.kernel_path(variant)).read_text()
    assert text.count(right) == 1, f"{chapter.kernel_path(variant)} no longer has {right!r}"
    path = tmp_path / f"{variant.name}_wrong.cu"
    path.write_text(text.replace(right, wrong))
    return path


def judged(chapter, variant, problem, backend, path, seed):
    """The verdict ``pmpp run`` gives at this size: exact where the chapter has exact inputs."""
    return runner.verify(chapter, variant, problem, backend=backend, path=path, seed=seed,
                         exact=chapter.make_exact_inputs is not None)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_kernel_fails_the_check_on_the_cpu_engine(name, tmp_path, seed):
    chapter = chapters.get(name)
    variant = chapter.variant(WRONG[name][0])
    problem = runner.default_problem(chapter, "cpu")
    assert judged(chapter, variant, problem, "cpu", None, seed).ok
    assert not judged(chapter, variant, problem, "cpu", wrong_kernel(tmp_path, chapter, variant), seed).ok


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_kernel_fails_the_check_at_full_size_on_the_gpu(name, tmp_path, seed):
    chapter = chapters.get(name)
    variant = chapter.variant(WRONG[name][0])
    problem = runner.problem_for(variant, runner.default_problem(chapter, "cupy"))
    if not variant.supports(problem, "cupy"):
        pytest.skip(f"{variant.name} does not run at {chapter.describe(problem)}")
    assert judged(chapter, variant, problem, "cupy", None, seed).ok
    result = judged(chapter, variant, problem, "cupy", wrong_kernel(tmp_path, chapter, variant), seed)
    assert not result.ok, f"{name}: a wrong kernel passed at {chapter.describe(problem)}: {result.detail}"


def test_measure_judges_sums_exactly(monkeypatch):
    # A sum that is off by one passes a rounding tolerance at a GPU's size, not measure's check.
    chapter = chapters.get("reduction")
    problem = {"n": 1 << 20}
    inputs = chapter.make_exact_inputs(problem, np, np.random.default_rng(1))
    reference = chapter.reference(problem, inputs)
    off_by_one = np.array([float(reference) + 1], np.float32)
    assert chapter.check(off_by_one, reference, problem).ok        # within the float tolerance
    assert not runner._judge(chapter)(off_by_one, reference, problem).ok
