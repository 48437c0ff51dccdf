"""CUDA constructs that real kernels use, loaded with pmpp.load and checked against NumPy on each
backend: headers included beside the .cu (with __shared__ inside them), `extern T __shared__ x[]`,
CUDA's standard headers, `static __constant__`, and structs and dim3 passed by value."""

import numpy as np
import pytest

import pmpp
from pmpp.runner import array_module


def run(module, name, grid, block, args, shared_mem=0):
    module.get_function(name)(grid, block, args, shared_mem=shared_mem)


def reversed_blocks(x, block):
    return x.reshape(-1, block)[:, ::-1].ravel()


def test_a_quoted_header_is_found_beside_the_including_file_and_its_extern_shared_is_rewritten(
        tmp_path, backend, rng):
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "scale.cuh").write_text(
        "#pragma once\n__device__ float scale(float v) { return 3.0f * v; }\n")
    (tmp_path / "common" / "stage.cuh").write_text(
        '#pragma once\n#include "scale.cuh"\n'     # relative to common/, as nvcc looks it up
        "__device__ float reverse_in_block(const float *in, int i) {\n"
        "    extern __shared__ float staged[];\n"
        "    staged[threadIdx.x] = in[i];\n"
        "    __syncthreads();\n"
        "    return scale(staged[blockDim.x - 1 - threadIdx.x]);\n"
        "}\n")
    kernel = tmp_path / "reverse.cu"
    kernel.write_text('#include "common/stage.cuh"\n#include "common/scale.cuh"\n'
                      "extern \"C\" __global__ void reverse(const float *in, float *out) {\n"
                      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "    out[i] = reverse_in_block(in, i);\n"
                      "}\n")
    xp, block = array_module(backend), 32
    x = rng.standard_normal(4 * block).astype(np.float32)
    out = xp.full(x.shape, np.nan, np.float32)
    run(pmpp.load(str(kernel), backend=backend), "reverse", 4, block, (xp.asarray(x), out),
        shared_mem=block * 4)
    np.testing.assert_array_equal(pmpp.asnumpy(out), 3.0 * reversed_blocks(x, block))


def test_an_error_in_an_included_header_names_the_header_and_its_line(tmp_path):
    (tmp_path / "helper.cuh").write_text("__device__ int one() {\n    return undeclared;\n}\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text('#include "helper.cuh"\n__global__ void k(int *o) { o[0] = one(); }\n')
    with pytest.raises(pmpp.CompileError) as raised:
        pmpp.load(str(kernel), backend="cpu")
    assert raised.value.filename.endswith("helper.cuh") and raised.value.line == 2


def test_a_changed_header_is_compiled_again(tmp_path):
    header, kernel = tmp_path / "value.cuh", tmp_path / "k.cu"
    kernel.write_text('#include "value.cuh"\n__global__ void k(int *o) { o[0] = VALUE; }\n')
    seen = []
    for value in (3, 4):
        header.write_text(f"#define VALUE {value}\n")
        out = np.zeros(1, np.int32)
        run(pmpp.load(str(kernel), backend="cpu"), "k", 1, 1, (out,))
        seen.append(int(out[0]))
    assert seen == [3, 4]


@pytest.mark.parametrize("declaration", ["extern float __shared__ tile[];",
                                         "extern volatile float __shared__ tile[];"])
def test_extern_shared_takes_its_qualifiers_in_any_order(declaration, backend, rng):
    source = ("extern \"C\" __global__ void reverse(const float *in, float *out) {\n"
              f"    {declaration}\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    tile[threadIdx.x] = in[i];\n"
              "    __syncthreads();\n"
              "    out[i] = tile[blockDim.x - 1 - threadIdx.x];\n"
              "}\n")
    xp, block = array_module(backend), 64
    x = rng.standard_normal(2 * block).astype(np.float32)
    out = xp.zeros_like(xp.asarray(x))
    run(pmpp.load(source=source, backend=backend), "reverse", 2, block, (xp.asarray(x), out),
        shared_mem=block * 4)
    np.testing.assert_array_equal(pmpp.asnumpy(out), reversed_blocks(x, block))


def test_a_static_shared_array_declared_after_its_type_is_per_block(backend, rng):
    source = ("extern \"C\" __global__ void block_sums(const int *in, int *out) {\n"
              "    static int __shared__ partial[128];\n"
              "    partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];\n"
              "    __syncthreads();\n"
              "    if (threadIdx.x == 0) {\n"
              "        int s = 0;\n"
              "        for (int k = 0; k < blockDim.x; ++k) s += partial[k];\n"
              "        out[blockIdx.x] = s;\n"
              "    }\n"
              "}\n")
    xp = array_module(backend)
    x = rng.integers(-100, 100, 3 * 128).astype(np.int32)
    out = xp.zeros(3, np.int32)
    run(pmpp.load(source=source, backend=backend), "block_sums", 3, 128, (xp.asarray(x), out))
    np.testing.assert_array_equal(pmpp.asnumpy(out), x.reshape(3, 128).sum(axis=1))


@pytest.mark.parametrize("header", ["device_functions.h", "vector_types.h", "vector_functions.h",
                                    "sm_20_atomic_functions.h", "math_functions.h"])
def test_cuda_standard_headers_are_there(header, backend):
    if backend == "cupy" and header in ("device_functions.h", "math_functions.h"):
        pytest.skip("NVRTC of the CUDA 13 wheels lacks the crt/ headers these include (nvcc warns "
                    "that they are internal and compiles them)")
    source = (f"#include <{header}>\n"
              "extern \"C\" __global__ void count(int *total) { atomicAdd(total, 1); }\n")
    xp = array_module(backend)
    total = xp.zeros(1, np.int32)
    run(pmpp.load(source=source, backend=backend), "count", 2, 32, (total,))
    assert int(pmpp.asnumpy(total)[0]) == 64


@pytest.mark.parametrize("check", [False, True])
def test_copy_to_symbol_reaches_a_static_constant_array(check, backend, rng):
    if check and backend != "cpu":
        pytest.skip("check=True runs on the CPU engine")
    source = ("static __constant__ float weights[4];\n"
              "extern \"C\" __global__ void weigh(const float *in, float *out) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    out[i] = in[i] * weights[i % 4];\n"
              "}\n")
    xp = array_module(backend)
    module = pmpp.load(source=source, backend=backend, check=check)
    w = rng.standard_normal(4).astype(np.float32)
    module.copy_to_symbol("weights", xp.asarray(w))
    x = rng.standard_normal(64).astype(np.float32)
    out = xp.zeros(64, np.float32)
    run(module, "weigh", 2, 32, (xp.asarray(x), out))
    np.testing.assert_array_equal(pmpp.asnumpy(out), x * np.tile(w, 16))


STRUCT_SOURCE = """
struct Affine { float scale; int shift; };
extern "C" __global__ void apply(Affine f, dim3 shape, const float *in, float *out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < shape.x * shape.y * shape.z) out[i] = f.scale * in[i] + f.shift;
}
"""
AFFINE = np.dtype([("scale", np.float32), ("shift", np.int32)], align=True)
DIM3 = np.dtype([("x", np.uint32), ("y", np.uint32), ("z", np.uint32)])


def test_a_struct_and_a_dim3_pass_by_value(backend, rng):
    xp = array_module(backend)
    shape = (5, 3, 2)
    x = rng.integers(-1000, 1000, 40).astype(np.float32)   # exact with or without a fused multiply-add
    out = xp.full(40, -1.0, np.float32)
    f = np.array((1.5, 7), AFFINE)[()]
    run(pmpp.load(source=STRUCT_SOURCE, backend=backend), "apply", 2, 32,
        (f, np.array(shape, DIM3)[()], xp.asarray(x), out))
    n = int(np.prod(shape))
    expected = np.concatenate([np.float32(1.5) * x[:n] + np.float32(7), np.full(40 - n, -1.0, np.float32)])
    np.testing.assert_array_equal(pmpp.asnumpy(out), expected)


def test_a_struct_of_the_wrong_layout_is_refused_with_the_fix():
    module = pmpp.load(source="struct P { char c; float v; };\n"
                              "extern \"C\" __global__ void k(P p, float *o) { o[0] = p.c * p.v; }\n", backend="cpu")
    packed = np.dtype([("c", np.int8), ("v", np.float32)])   # 5 bytes; C pads P to 8
    with pytest.raises(TypeError, match="align=True"):
        run(module, "k", 1, 1, (np.array((2, 1.5), packed)[()], np.zeros(1, np.float32)))


def test_a_python_tuple_for_a_struct_parameter_says_how_to_pass_one():
    module = pmpp.load(source=STRUCT_SOURCE, backend="cpu")
    with pytest.raises(TypeError, match="structured scalar"):
        run(module, "apply", 1, 32, ((1.5, 7), np.array((1, 1, 1), DIM3)[()],
                                     np.zeros(32, np.float32), np.zeros(32, np.float32)))

