"""NVRTC's front end checks kernel code before the CPU engine compiles it (pmpp.backends.cpu.nvrtc):
what NVRTC refuses and g++ accepts is a CompileError at NVRTC's line; a header NVRTC cannot find
marks the check skipped and the engine's own device-code check still runs; $PMPP_NVRTC=0 turns it
off; every workbook kernel passes it."""

import json
from pathlib import Path

import pytest

from pmpp import chapters
from pmpp.backends.cpu import CpuModule, devicecheck, nvrtc, toolchain
from pmpp.errors import CompileError
from pmpp.source import define_options, expand_includes, find_kernels, with_line_directive

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(nvrtc.library() is None,
                                reason="NVRTC is not installed (pip install nvidia-cuda-nvrtc)")


@pytest.fixture(autouse=True)
def _checks_on(monkeypatch):
    for var in (nvrtc.ENV_VAR, "PMPP_DEVICE_CHECK", "PMPP_TARGET"):
        monkeypatch.delenv(var, raising=False)


def build(text, filename="nv.cu", options=()):
    kernels = [n for n, sig in find_kernels(text).items() if not sig.template_params]
    return CpuModule(with_line_directive(text, filename), filename=filename, kernel_names=kernels,
                     options=list(options))


def nvrtc_says(text, filename="nv.cu", options=(), name_expressions=()):
    """NVRTC's verdict alone, uncached."""
    return nvrtc.check(with_line_directive(text, filename), filename, options, name_expressions)


def line_of(text, needle):
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# Valid for g++ and for the engine's own check, refused by CUDA's front end.
STATIC_INIT = ("__device__ int first() { return 1; }\n"
               "__global__ void k(int *p) {\n"
               "    static int once = first();\n"
               "    p[0] = once;\n"
               "}\n")
UNUSED_HOST_FUNCTION = ("float twice(float x) { return 2 * x; }\n"
                        "__global__ void k(float *p) { p[0] = 1; }\n")
PRELUDE_CONSTANT = "__global__ void k(int *p) {\n    p[0] = INT_MIN;\n}\n"


def test_a_plain_host_function_is_refused_at_its_line_in_nvrtcs_words():
    text = ("__global__ void k(float *p) { p[0] = 1; }\n"
            "float twice(float x) { return 2 * x; }\n"
            "__global__ void k2(float *p) { p[0] = twice(p[0]); }\n")
    with pytest.raises(CompileError) as err:
        nvrtc_says(text)
    assert (err.value.filename, err.value.line) == ("nv.cu", 2)
    assert str(err.value).startswith("nv.cu:2: A function without execution space annotations")
    assert "host functions are not allowed in JIT mode" in str(err.value)
    assert "    2 | float twice" in str(err.value)
    assert "|       ^" in str(err.value)   # NVRTC's caret, under "twice"


@pytest.mark.parametrize("text, needle, words", [
    (STATIC_INIT, "static int once", "dynamic initialization is not supported"),
    (UNUSED_HOST_FUNCTION, "float twice", "host functions are not allowed in JIT mode"),
    (PRELUDE_CONSTANT, "INT_MIN", 'identifier "INT_MIN" is undefined'),
])
def test_what_gxx_accepts_and_nvrtc_refuses_is_a_compile_error_at_the_line(monkeypatch, text, needle, words):
    with pytest.raises(CompileError) as err:
        build(text)
    line = line_of(text, needle)
    assert (err.value.filename, err.value.line) == ("nv.cu", line)
    assert str(err.value).startswith(f"nv.cu:{line}: ") and words in str(err.value)
    assert f"nvrtc {nvrtc.library().version[0]}." in str(err.value)
    monkeypatch.setenv(nvrtc.ENV_VAR, "0")
    build(text)   # the engine and its own device-code check accept it: NVRTC alone refuses it


def test_the_engines_call_site_message_comes_first_where_both_refuse():
    text = ("float twice(float x) { return 2 * x; }\n"
            "__global__ void k(float *p) { p[0] = twice(p[0]); }\n")
    with pytest.raises(CompileError) as err:
        build(text)
    assert str(err.value).startswith('nv.cu:2: calling a __host__ function("twice(float)") from a '
                                     '__global__ function("k") is not allowed')


def test_a_header_nvrtc_lacks_skips_it_and_the_engines_check_still_refuses_host_calls():
    text = ('#include <cstdio>\n'
            '__global__ void k(int *p) {\n'
            '    FILE *f = fopen("/dev/null", "w");\n'
            '    p[0] = f != 0;\n'
            '}\n')
    assert nvrtc_says(text) == "skipped: <cstdio> not available to NVRTC"
    with pytest.raises(CompileError) as err:
        build(text)
    assert str(err.value).startswith('nv.cu:3: calling a __host__ function("fopen")')


def test_cudas_headers_come_from_nvrtcs_own_bundle():
    text = ("#include <cuda_fp16.h>\n"
            "__global__ void k(__half *p) { p[0] = __float2half(1.0f); }\n")
    assert nvrtc_says(text) == f"{nvrtc.library().name}: passed"


def test_an_error_inside_the_cuda_headers_given_to_nvrtc_is_not_the_users(monkeypatch, tmp_path):
    (tmp_path / "cuda_fp16.h").write_text("this is not C++;\n")
    monkeypatch.setattr(nvrtc, "include_dirs", lambda *_: [str(tmp_path)])
    text = "#include <cuda_fp16.h>\n__global__ void k(float *p) { p[0] = 1; }\n"
    said = nvrtc.check(with_line_directive(text, "nv.cu"), "nv.cu", (), (), tmp_path)
    assert said.startswith(f"skipped: {nvrtc.library().name} failed in cuda_fp16.h")


def test_the_verdict_says_what_nvrtc_did_and_is_kept_on_the_module():
    text = "__global__ void k(float *p) { p[0] = 1; }\n"
    mod = build(text)
    assert mod.device_check.nvrtc == f"{nvrtc.library().name}: passed"
    assert devicecheck.Verdict(True).nvrtc == nvrtc.NOT_INSTALLED


def test_turned_off_it_says_so(monkeypatch):
    monkeypatch.setenv(nvrtc.ENV_VAR, "0")
    assert nvrtc_says(UNUSED_HOST_FUNCTION) == f"skipped: turned off by ${nvrtc.ENV_VAR}"
    monkeypatch.setenv(nvrtc.ENV_VAR, "1")
    monkeypatch.setenv("PMPP_DEVICE_CHECK", "0")   # the sandbox's hostile kernels: no check at all
    mod = build(UNUSED_HOST_FUNCTION)
    assert mod.device_check.nvrtc.startswith("skipped: turned off")


def test_it_compiles_for_the_engines_target(monkeypatch):
    text = "__global__ void k(unsigned *p) { p[0] = __reduce_add_sync(0xffffffffu, p[threadIdx.x]); }\n"
    assert nvrtc_says(text).endswith("passed")            # sm_90 by default: sm_80 has it
    monkeypatch.setenv("PMPP_TARGET", "sm_75")
    with pytest.raises(CompileError, match='identifier "__reduce_add_sync" is undefined'):
        nvrtc_says(text)


def test_template_instances_named_at_load_are_checked():
    text = ("struct Host { static int value() { return 1; } };\n"
            "struct Dev { __device__ static int value() { return 1; } };\n"
            "template <class T> __global__ void k(int *p) { p[0] = T::value(); }\n")
    with pytest.raises(CompileError):
        nvrtc_says(text.replace("struct Host { static", "struct Host { __host__ static"),
                    name_expressions=["k<Host>"])
    assert nvrtc_says(text.split("\n", 1)[1], name_expressions=["k<Dev>"]).endswith("passed")


def test_a_verdict_is_cached_and_a_refusal_is_not(monkeypatch, tmp_path):
    src, calls = with_line_directive("__global__ void k(int *p) { p[0] = 1; }\n", "nv.cu"), []
    real = nvrtc.compile_program
    monkeypatch.setattr(nvrtc, "compile_program", lambda *a, **k: calls.append(1) or real(*a, **k))
    for _ in range(2):
        assert nvrtc.check(src, "nv.cu", (), (), tmp_path, toolchain.digest).endswith("passed")
    assert len(calls) == 1
    [cached] = tmp_path.glob("nvrtc-*.json")
    assert json.loads(cached.read_text())["verdict"].endswith("passed")
    bad = with_line_directive(PRELUDE_CONSTANT, "nv.cu")
    for _ in range(2):
        with pytest.raises(CompileError):
            nvrtc.check(bad, "nv.cu", (), (), tmp_path, toolchain.digest)
    assert len(calls) == 3 and len(list(tmp_path.glob("nvrtc-*.json"))) == 1


def test_only_front_end_options_reach_nvrtc():
    given = ["-DTILE=8", "-arch=sm_90", "--use_fast_math", "-I", "inc", "-std=c++17", "-lineinfo",
             "--expt-relaxed-constexpr", "-U", "X"]
    assert nvrtc.front_end_options(given) == ["-DTILE=8", "-I", "inc", "-std=c++17",
                                              "--expt-relaxed-constexpr", "-U", "X"]


@pytest.mark.slow
def test_every_workbook_kernel_passes_nvrtc():
    checked, refused = 0, []
    for chapter in map(chapters.get, chapters.names()):
        for variant in chapter.variants:
            name = chapter.kernel_path(variant)
            path = ROOT / "kernels" / name
            text = expand_includes(path.read_text(), name, path.parent)    # as pmpp.load gives it
            try:
                said = nvrtc.check(with_line_directive(text, name), name, define_options(variant.defines),
                                   variant.name_expressions, toolchain.cache_dir(), toolchain.digest)
            except CompileError as error:
                refused.append(f"{name} ({variant.name}): {error}")
                continue
            assert said.endswith("passed"), f"{name} ({variant.name}): {said}"
            checked += 1
    assert not refused
    assert checked > 50


def test_nvrtc_runs_under_the_compile_limits(monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_COMPILE_TIMEOUT", "0.01")   # too short for any compile to finish
    text = with_line_directive("__global__ void k(int *p) { p[0] = 3; }\n", "limits.cu")
    with pytest.raises(CompileError, match=r"nvrtc \d+\.\d+ did not finish compiling limits.cu"):
        nvrtc.check(text, "limits.cu", cache_dir=tmp_path, digest=toolchain.digest)


def test_a_macro_that_breaks_nvrtcs_own_header_is_named(tmp_path):
    text = with_line_directive("__global__ void k(float *p) { p[0] = T; }\n", "clash.cu")
    with pytest.raises(CompileError, match=r"clash.cu: the macro T \(from defines= or -D\) breaks CUDA's own header") as err:
        nvrtc.check(text, "clash.cu", ["-DT=4"], cache_dir=tmp_path, digest=toolchain.digest)
    assert "TILE_DIM rather than T" in str(err.value)
    assert nvrtc.check(text.replace("T;", "TILE_DIM;"), "clash.cu", ["-DTILE_DIM=4"], cache_dir=tmp_path,
                       digest=toolchain.digest).endswith(": passed")
