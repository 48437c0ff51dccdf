"""Device code calls only what CUDA's device code may (pmpp.backends.cpu.devicecheck): a kernel
that calls a host function is a CompileError at the line of the call, in NVRTC's words; what CUDA
accepts (printf, malloc, memcpy, math, atomics, warp functions, __device__ helpers, templates)
compiles and runs; no kernel of the workbook or of the tests is refused."""

from pathlib import Path

import numpy as np
import pytest

from pmpp import chapters
from pmpp.backends.cpu import CpuModule, devicecheck, flags, toolchain
from pmpp.backends.cpu import source as engine_source
from pmpp.errors import CompileError
from pmpp.source import define_options, expand_includes, find_kernels, with_line_directive

ROOT = Path(__file__).resolve().parent.parent
KERNELS = Path(__file__).parent / "cpu_kernels"


def build(text, filename="dev.cu", kernels=None, options=()):
    kernels = kernels or [n for n, sig in find_kernels(text).items() if not sig.template_params]
    return CpuModule(with_line_directive(text, filename), filename=filename, kernel_names=kernels,
                     options=list(options))


def refusal(text, filename="dev.cu", **kw):
    with pytest.raises(CompileError) as err:
        build(text, filename, **kw)
    return err.value


def line_of(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize("name, kernel, call", [
    ("hostile/files.cu", "write_file", "fopen"),
    ("hostile/processes.cu", "run_shell", "system"),
    ("hostile/network.cu", "phone_home", "socket"),
])
def test_a_kernel_calling_the_c_library_is_refused_at_the_line_in_cudas_words(name, kernel, call):
    text = (KERNELS / name).read_text()
    err = refusal(text, f"cpu_kernels/{name}", kernels=[kernel],
                  options=['-DTARGET="/nonexistent/x"', "-DPORT=9"])
    line = line_of(text, f"{call}(")
    assert str(err).startswith(f'cpu_kernels/{name}:{line}: calling a __host__ function("{call}") from a '
                               f'__global__ function("{kernel}") is not allowed\n')
    assert (err.filename, err.line) == (f"cpu_kernels/{name}", line)
    assert f"{line:5} | " in str(err)   # the line is quoted


def test_a_plain_function_is_host_code_and_refused_from_a_kernel_and_a_device_function():
    text = ("float twice(float x) { return 2 * x; }\n"
            "__device__ float helper(float x) { return twice(x); }\n"
            "__global__ void k(float *p) { p[0] = helper(p[0]); }\n")
    err = refusal(text)
    assert str(err).startswith('dev.cu:2: calling a __host__ function("twice(float)") from a '
                               '__device__ function("helper") is not allowed')
    kernel_calls_it = ("float twice(float x) { return 2 * x; }\n"
                       "__global__ void k(float *p) { p[0] = twice(p[0]); }\n")
    assert str(refusal(kernel_calls_it)).startswith(
        'dev.cu:2: calling a __host__ function("twice(float)") from a __global__ function("k")')


def test_host_calls_hidden_in_macros_templates_and_user_headers_are_found(tmp_path):
    (tmp_path / "log.cuh").write_text("#include <cstdio>\n\ntemplate <class T>\n__device__ void note(T x) {\n"
                                      "    fputs(\"x\", stderr);\n}\n")
    text = ('#include "log.cuh"\n#define DEV __device__\n#define SHELL(c) system(c)\n#include <cstdlib>\n'
            "DEV int run() { return SHELL(\"id\"); }\n"
            "__global__ void k(int *p) { note(p[0]); p[1] = run(); }\n")
    filename = str(tmp_path / "dev.cu")
    err = refusal(text, filename, options=[f"-I{tmp_path}"])
    assert str(err).startswith(f'{tmp_path / "log.cuh"}:5: calling a __host__ function("fputs") from a '
                               f'__device__ function("note<int>") is not allowed')
    assert "(and 2 more after this one)" in str(err)   # stderr, and system() in run()
    assert f'{filename}:5: error: system called from' in err.log


def test_the_standard_library_beyond_its_math_is_host_code():
    text = "#include <vector>\n__global__ void k(int *p) {\n    std::vector<int> v(4);\n    p[0] = v[0];\n}\n"
    assert 'dev.cu:3: calling a __host__ function("std::' in str(refusal(text))


ACCEPTED = r"""
#include <cstdio>
#include <cmath>
#include <cuda_fp16.h>
#define HD __host__ __device__
struct Pair { float a, b; };                         // implicit members are __host__ __device__
template <typename T> __device__ T twice(T x) { return x + x; }
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
HD inline float square(float x) { return x * x; }
__device__ int counter;
extern "C" __global__ void k(float *out, int *flag) {
    int t = threadIdx.x;
    Pair p{float(t), 1.0f};
    auto add = [&](float x) { return x + p.b; };
    float v = sqrtf(square(p.a)) + std::sqrt(4.0f) + fabsf(-1.0f) + expf(0.0f) + twice(1.0f) + add(0.0f);
    float *scratch = (float *)malloc(sizeof(float));
    memset(scratch, 0, sizeof(float));
    memcpy(scratch, &v, sizeof v);
    v = *scratch;
    free(scratch);
    atomicAdd(&counter, 1);
    atomicMax(flag, t);
    float s = warp_sum(v);
    __syncthreads();
    if (t == 0) {
        out[0] = s + __half2float(__float2half(0.5f));
        printf("sum %g\n", s);
    }
}
"""


def test_what_cuda_device_code_may_call_compiles_and_runs(capsys):
    mod = build(ACCEPTED, kernels=["k"])
    out, flag = np.zeros(1, np.float32), np.zeros(1, np.int32)
    mod.launch("k", (1, 1, 1), (32, 1, 1), 0, [out, flag], ["out", "flag"], [True, True])
    t = np.arange(32, dtype=np.float32)
    # sqrt(t^2) + 2 + 1 + 1 + 2 + 1 per lane, summed over the warp, plus 0.5
    assert out[0] == pytest.approx(float(np.sum(t + 7)) + 0.5)
    assert flag[0] == 31
    assert "sum" in capsys.readouterr().out


def test_host_code_outside_device_code_is_left_alone():
    text = ("#include <cstdio>\nvoid dump(const char *p) { FILE *f = fopen(p, \"w\"); fclose(f); }\n"
            "__global__ void k(int *p) { p[0] = 1; }\n")
    build(text)   # as NVRTC and nvcc: host functions may do host work


def test_turned_off_it_compiles_hostile_kernels_and_a_cached_build_never_bypasses_it(monkeypatch):
    text = (KERNELS / "hostile/processes.cu").read_text()
    monkeypatch.setenv("PMPP_DEVICE_CHECK", "0")
    build(text, "cpu_kernels/hostile/processes.cu", kernels=["run_shell"])   # for the sandbox's tests
    monkeypatch.setenv("PMPP_DEVICE_CHECK", "1")
    refusal(text, "cpu_kernels/hostile/processes.cu", kernels=["run_shell"])


def verdict(text, filename, options=(), name_expressions=()):
    """What the check says of a file as the engine would compile it (without compiling a module)."""
    names = [n for n, sig in find_kernels(text).items() if not sig.template_params] + list(name_expressions)
    full = with_line_directive(text, filename)
    prepared = engine_source.rewrite(full, filename) + engine_source.kernel_table(names)
    compiler_flags = flags.translate_options(options)
    return devicecheck.refuse_host_calls(full, prepared, filename, compiler_flags, toolchain.cache_dir())


def test_the_verdict_says_whether_nvrtc_checked_too(monkeypatch):
    result = verdict("__global__ void k(int *p) { p[0] = 1; }\n", "dev.cu")
    assert result.checked and (result.nvrtc.startswith("skipped") or result.nvrtc.endswith(": passed"))
    monkeypatch.setenv("PMPP_NVRTC", "0")
    result = verdict("__global__ void k(int *p) { p[0] = 2; }\n", "dev.cu")
    assert result.checked and result.nvrtc == "skipped: turned off by $PMPP_NVRTC"


def _workbook_variants():
    for chapter in map(chapters.get, chapters.names()):
        for variant in chapter.variants:
            if not variant.gpu_only:
                yield chapter, variant


@pytest.mark.slow
def test_no_workbook_or_test_kernel_is_refused():
    covered, unchecked = set(), []
    for chapter, variant in _workbook_variants():
        path = ROOT / "kernels" / chapter.kernel_path(variant)
        covered.add(path)
        result = verdict(expand_includes(path.read_text(), chapter.kernel_path(variant), path.parent),
                         chapter.kernel_path(variant), define_options(variant.defines), variant.name_expressions)
        unchecked += [] if result.checked else [f"{path}: {result.reason}"]
    others = sorted(set((ROOT / "kernels").rglob("*.cu")) - covered - {
        ROOT / "kernels" / chapter.kernel_path(v) for chapter in map(chapters.get, chapters.names())
        for v in chapter.variants if v.gpu_only})
    others += sorted(KERNELS.glob("*.cu")) + sorted((ROOT / "tests" / "kernels").rglob("*.cu"))
    for path in others:
        result = verdict(expand_includes(path.read_text(), str(path.relative_to(ROOT)), path.parent),
                         str(path.relative_to(ROOT)))
        unchecked += [] if result.checked else [f"{path}: {result.reason}"]
    assert len(covered) > 50 and len(others) > 10
    assert not unchecked   # every one was compiled and checked, not skipped
