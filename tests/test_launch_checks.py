"""Launch checks shared by both backends: signatures, grid/block limits, argument conversion."""
import numpy as np
import pytest

import pmpp
from pmpp import args as launch_args
from pmpp.source import compile_error, find_kernels, signature_for, with_line_directive

SOURCE = """
// a comment with __global__ void not_a_kernel(int x)
extern "C" __global__ void scale(const float* __restrict__ in, float* out, float a, unsigned int n) {}
template <unsigned int blockSize, typename T>
__global__ void reduce5(const T* g_idata, T* g_odata, unsigned int n) {}
extern "C" __global__ void __launch_bounds__(256) vec(const float4* in, __half* h, int k) {}
"""


def test_find_kernels_reads_parameter_lists_and_skips_comments():
    kernels = find_kernels(SOURCE)
    assert sorted(kernels) == ["reduce5", "scale", "vec"]
    params = kernels["scale"].params
    assert [p.name for p in params] == ["in", "out", "a", "n"]
    assert [p.base for p in params] == ["float", "float", "float", "unsigned int"]
    assert [p.pointer for p in params] == [True, True, False, False]
    assert [p.const for p in params] == [True, False, False, False]


def test_template_instance_substitutes_type_parameters():
    sig = signature_for(find_kernels(SOURCE), "reduce5<256, double>")
    assert sig.name == "reduce5<256, double>"
    assert [p.base for p in sig.params] == ["double", "double", "unsigned int"]


def test_compile_error_names_file_and_line_for_nvrtc_and_gcc_logs():
    nvrtc = compile_error('reduction/x.cu(12): error: identifier "q" is undefined\n', "reduction/x.cu")
    gcc = compile_error("reduction/x.cu:7:3: error: expected ';' before '}' token\n", "reduction/x.cu")
    assert (nvrtc.filename, nvrtc.line) == ("reduction/x.cu", 12)
    assert str(nvrtc).startswith('reduction/x.cu:12: identifier "q" is undefined')
    assert (gcc.line, gcc.filename) == (7, "reduction/x.cu")


def test_line_directive_comes_first():
    assert with_line_directive("int x;", "a/b.cu").splitlines()[0] == '#line 1 "a/b.cu"'


@pytest.mark.parametrize("block, message", [
    ((2048,), "exceeds CUDA's limit 1024"),
    ((32, 32, 2), "2048 threads"),
    ((1, 1, 65), "exceeds CUDA's limit 64"),
    (0, "dimension < 1"),
])
def test_block_limits_are_enforced(block, message):
    with pytest.raises(ValueError, match=message):
        launch_args.check_launch(1, block, 0, 48 * 1024)


def test_grid_and_shared_memory_limits_are_enforced():
    with pytest.raises(ValueError, match="exceeds CUDA's limit 65535"):
        launch_args.check_launch((1, 70000), 32, 0, 48 * 1024)
    with pytest.raises(ValueError, match="shared memory"):
        launch_args.check_launch(1, 32, 64 * 1024, 48 * 1024)
    assert launch_args.check_launch((4, 2), 128, 0, 1024) == ((4, 2, 1), (128, 1, 1), 0)


def _scale():
    return find_kernels(SOURCE)["scale"]


def test_python_scalars_become_the_parameters_c_types():
    x, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
    converted = launch_args.convert_args(_scale(), (x, out, 2.5, 4), np.ndarray, "cpu")
    assert converted[2].dtype == np.float32 and converted[2] == np.float32(2.5)
    assert converted[3].dtype == np.uint32 and converted[3] == 4


@pytest.mark.parametrize("bad, error, message", [
    (lambda x, o: (x.astype(np.float64), o, 1.0, 4), TypeError, "dtype is float64 but the kernel expects float32"),
    (lambda x, o: (x, o, 1.0, 4.0), TypeError, "float 4.0 for an integer parameter"),
    (lambda x, o: (x, o, 1.0, -1), ValueError, "does not fit in uint32"),
    (lambda x, o: (x, o, np.float64(1.0), 4), TypeError, "numpy.float64 scalar but the parameter is float"),
    (lambda x, o: (x, o, 1.0), TypeError, "takes 4 arguments but 3 were given"),
    (lambda x, o: (x, o[::2], 1.0, 2), ValueError, "not C-contiguous"),
    (lambda x, o: (x, [0.0] * 4, 1.0, 4), TypeError, "expected an array"),
    (lambda x, o: (x, o, x, 4), TypeError, "expected a scalar"),
])
def test_bad_arguments_are_refused_with_advice(bad, error, message):
    x, out = np.zeros(4, np.float32), np.zeros(8, np.float32)
    with pytest.raises(error, match=message):
        launch_args.convert_args(_scale(), bad(x, out), np.ndarray, "cpu")


def test_read_only_array_for_a_written_pointer_is_refused():
    x, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        launch_args.convert_args(_scale(), (x, out, 1.0, 4), np.ndarray, "cpu")


def test_vector_types_need_whole_vectors_and_alignment():
    vec = find_kernels(SOURCE)["vec"]
    h = np.zeros(3, np.float16)
    with pytest.raises(ValueError, match="not a multiple of 4"):
        launch_args.convert_args(vec, (np.zeros(6, np.float32), h, 1), np.ndarray, "cpu")
    with pytest.raises(ValueError, match="16-byte aligned"):
        launch_args.convert_args(vec, (np.zeros(9, np.float32)[1:], h, 1), np.ndarray, "cpu")
    ok = launch_args.convert_args(vec, (np.zeros(8, np.float32), h, 1), np.ndarray, "cpu")
    assert ok[2].dtype == np.int32


def test_missing_kernel_file_suggests_close_names():
    with pytest.raises(FileNotFoundError, match="no kernel file"):
        pmpp.load("reduction/does_not_exist.cu")


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend"):
        pmpp.load(source="extern \"C\" __global__ void k() {}", backend="tpu")


def test_array_module_helpers_follow_cupy():
    a = np.arange(3)
    assert pmpp.get_array_module(a) is np
    assert np.array_equal(pmpp.asnumpy(a), a)


def test_module_remembers_how_it_was_built():
    mod = pmpp.load("reduction/12_reduce5.cu", backend="cpu", name_expressions=("reduce5<128>",),
                    defines={"UNUSED": 1})
    assert mod.defines == {"UNUSED": 1} and mod.name_expressions == ("reduce5<128>",)
    assert mod.kernel_names == ["reduce5<128>"]


class _FakeFunction:
    """What the GPU backend reads and sets on a cupy.cuda.Function."""
    def __init__(self, static):
        self.shared_size_bytes = static
        self.max_dynamic_shared_size_bytes = 48 * 1024 - static


def test_static_plus_dynamic_shared_memory_past_48_kb_opts_in():
    from pmpp.backends.gpu import allow_dynamic_shared
    small = _FakeFunction(static=33 * 1024)
    allow_dynamic_shared(small, "k", 8 * 1024, 227 * 1024)          # 41 KB in all: no opt-in needed
    assert small.max_dynamic_shared_size_bytes == 15 * 1024
    large = _FakeFunction(static=33 * 1024)
    allow_dynamic_shared(large, "k", 30 * 1024, 227 * 1024)         # 63 KB in all
    assert large.max_dynamic_shared_size_bytes == 30 * 1024
    with pytest.raises(ValueError, match=r"static __shared__ memory.*ask for at most 198656 bytes"):
        allow_dynamic_shared(_FakeFunction(static=33 * 1024), "k", 200 * 1024, 227 * 1024)


SHARED_BOTH = r"""
extern "C" __global__ void copy_through_shared(const float* x, float* y, int n) {
    __shared__ float static_s[8192];              // 32 KB
    extern __shared__ float dynamic_s[];
    int i = threadIdx.x;
    static_s[i] = x[i];
    dynamic_s[i] = static_s[i] * 2.0f;
    __syncthreads();
    if (i < n) {
        y[i] = dynamic_s[i];
    }
}
"""


@pytest.mark.gpu
def test_static_and_dynamic_shared_memory_launch_on_the_gpu(tmp_path):
    import cupy
    path = tmp_path / "shared_both.cu"
    path.write_text(SHARED_BOTH)
    kernel = pmpp.load(str(path), backend="cupy").get_function("copy_through_shared")
    x = cupy.arange(256, dtype=cupy.float32)
    y = cupy.full(256, -1, dtype=cupy.float32)
    kernel(1, 256, (x, y, 256), shared_mem=30 * 1024)               # 62 KB per block in all
    assert bool((y == 2 * x).all())


CONDITIONAL = """
#ifndef BINS
#define BINS 7
#endif
#if 0
extern "C" __global__ void old_version(float* out) { out[0] = undeclared_name; }
#endif
#if BINS == 256
extern "C" __global__ void bytes(float* out) { out[0] = 256.0f; }
#elif defined(LETTERS) && !defined(NO_LETTERS)
extern "C" __global__ void letters(float* out) { out[0] = 26.0f; }
#else
extern "C" __global__ void sevens(float* out) { out[0] = 7.0f; }
#endif
#if __CUDA_ARCH__ >= 800
extern "C" __global__ void ampere(float* out) { out[0] = 80.0f; }
#endif
"""


@pytest.mark.parametrize("defines, kernels", [
    ({}, ["ampere", "sevens"]),
    ({"BINS": 256}, ["ampere", "bytes"]),
    ({"LETTERS": 1}, ["ampere", "letters"]),
    ({"LETTERS": 1, "NO_LETTERS": 1}, ["ampere", "sevens"]),
])
def test_kernels_in_branches_the_preprocessor_skips_are_no_kernels(defines, kernels):
    from pmpp.conditionals import macros_of
    from pmpp.source import define_options
    assert sorted(find_kernels(CONDITIONAL, macros_of(define_options(defines)))) == kernels


def test_a_kernel_under_if_0_neither_builds_nor_fails_the_build():
    module = pmpp.load(source=CONDITIONAL, filename="conditional.cu", backend="cpu", defines={"BINS": 256})
    assert "old_version" not in module.kernel_names and "sevens" not in module.kernel_names
    out = np.zeros(1, np.float32)
    module.get_function("bytes")(1, 1, (out,))
    assert out[0] == 256.0
