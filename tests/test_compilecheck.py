"""pmpp.compilecheck with the real nvcc: the resource report parsed, template instances named,
compile errors pointing at the line."""
import pytest

from pmpp import cli, compilecheck, targets
from pmpp.errors import BackendUnavailableError, CompileError

HAVE_NVCC = compilecheck.nvcc_available()

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found: install the CUDA toolkit")

KERNEL = """\
#ifndef BLOCK_DIM
#define BLOCK_DIM 64
#endif
template <unsigned BLOCK>
__global__ void block_sum(const float* in, float* out) {
    __shared__ float s[BLOCK];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * BLOCK + t];
    for (unsigned k = BLOCK / 2; k > 0; k >>= 1) {
        __syncthreads();
        if (t < k) s[t] += s[t + k];
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void scale(float* x, float a, int n) {
    __shared__ float tile[BLOCK_DIM];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) x[i] = a * tile[threadIdx.x];
}
"""

BROKEN = """\
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i]
}
"""


@pytest.fixture
def kernels(tmp_path):
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "01_k.cu").write_text(KERNEL)
    (tmp_path / "ch" / "02_broken.cu").write_text(BROKEN)
    return tmp_path


def rows_by_kernel(rows):
    return {(r["kernel"], r["arch"]): r for r in rows}


@needs_nvcc
def test_report_has_a_row_per_kernel_and_arch_from_the_t4_to_the_h100(kernels):
    rows = compilecheck.check_kernels([("ch/01_k.cu", {}, ("block_sum<128>",))], kernels_dir=kernels)
    assert sorted(rows_by_kernel(rows)) == sorted((k, arch) for k in ("block_sum<128u>", "scale")
                                                  for arch in targets.ARCHS)
    for r in rows:
        assert r["file"] == "ch/01_k.cu"
        assert r["registers"] > 0 and (r["status"], r["reason"]) == ("ok", None)
        assert r["stack_bytes"] == 0 and r["spill_stores"] == 0 and r["spill_loads"] == 0


@needs_nvcc
def test_a_report_is_reused_until_the_source_changes(kernels, monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path / "cache"))
    target = [("ch/01_k.cu", {}, ())]
    first = compilecheck.check_kernels(target, archs=("sm_90",), kernels_dir=kernels)
    monkeypatch.setattr(compilecheck, "_compile_report", None)       # a second compile would fail
    assert compilecheck.check_kernels(target, archs=("sm_90",), kernels_dir=kernels) == first
    (kernels / "ch" / "01_k.cu").write_text(KERNEL.replace("tile[BLOCK_DIM]", "tile[2 * BLOCK_DIM]"))
    with pytest.raises(TypeError):
        compilecheck.check_kernels(target, archs=("sm_90",), kernels_dir=kernels)


@needs_nvcc
def test_keep_going_reports_a_failure_with_its_first_error_and_checks_the_rest(kernels):
    rows = compilecheck.check_kernels([("ch/02_broken.cu", {}, ()), ("ch/01_k.cu", {}, ())], archs=("sm_90",),
                                      kernels_dir=kernels, keep_going=True)
    (failed,) = [r for r in rows if r["status"] == "failed"]
    assert failed["file"] == "ch/02_broken.cu" and failed["kernel"] is None
    assert "02_broken.cu:4:" in failed["reason"] and "\n" not in failed["reason"]
    assert isinstance(failed["error"], CompileError)
    assert [(r["kernel"], r["status"]) for r in rows if r["file"] == "ch/01_k.cu"] == [("scale", "ok")]


@needs_nvcc
def test_a_variant_that_needs_a_newer_gpu_is_not_compiled_for_older_ones(kernels):
    rows = compilecheck.check_kernels([("ch/01_k.cu", {}, (), 90)], archs=("sm_75", "sm_90"), kernels_dir=kernels)
    by_arch = {r["arch"]: r for r in rows}
    assert (by_arch["sm_75"]["status"], by_arch["sm_75"]["reason"]) == ("needs newer", "needs sm_90")
    assert by_arch["sm_75"]["registers"] is None
    assert (by_arch["sm_90"]["status"], by_arch["sm_90"]["kernel"]) == ("ok", "scale")


def run_check_kernels(monkeypatch, capsys, kernels, targets_, archs):
    monkeypatch.setenv("PMPP_KERNELS", str(kernels))
    monkeypatch.setattr(cli, "kernel_targets", lambda names: targets_)
    status = cli.main(["check-kernels", "--arch", *archs])
    return status, capsys.readouterr().out


@needs_nvcc
def test_check_kernels_fails_for_a_kernel_that_does_not_compile_and_goes_on(kernels, monkeypatch, capsys):
    status, out = run_check_kernels(monkeypatch, capsys, kernels,
                                    [("ch/02_broken.cu", {}, (), 0), ("ch/01_k.cu", {}, (), 90)],
                                    ("sm_75", "sm_90"))
    assert status == 1
    broken = next(line for line in out.splitlines() if line.startswith("ch/02_broken.cu"))
    assert broken.split()[2:] == ["FAILED", "[1]", "FAILED", "[2]"]
    assert "[1] ch/02_broken.cu (sm_75): " in out and "02_broken.cu:4:" in out
    scale = next(line for line in out.splitlines() if line.startswith("ch/01_k.cu"))
    assert scale.split()[:5] == ["ch/01_k.cu", "scale", "needs", "sm_90", str(
        compilecheck.check_kernels([("ch/01_k.cu", {}, ())], archs=("sm_90",), kernels_dir=kernels)[0]["registers"])]
    assert "sm_75: 0 compiled, 1 need a newer GPU, 1 failed" in out
    assert "sm_90: 1 compiled, 0 need a newer GPU, 1 failed" in out


@needs_nvcc
def test_check_kernels_passes_when_a_variant_only_needs_a_newer_gpu(kernels, monkeypatch, capsys):
    status, out = run_check_kernels(monkeypatch, capsys, kernels, [("ch/01_k.cu", {}, (), 90)], ("sm_75", "sm_90"))
    assert status == 0
    assert "needs sm_90" in out and "FAILED" not in out
    assert "sm_75: 0 compiled, 1 need a newer GPU, 0 failed" in out


def test_every_variants_min_arch_is_a_target_or_zero():
    from pmpp import chapters
    archs = {compilecheck.arch_number(a) for a in targets.ARCHS}
    assert {v.min_arch for c in map(chapters.get, chapters.names()) for v in c.variants} <= archs | {0}


@needs_nvcc
def test_shared_memory_follows_template_argument_and_defines(kernels):
    rows = compilecheck.check_kernels([("ch/01_k.cu", {"BLOCK_DIM": 256}, ("block_sum<128>", "block_sum<32>"))],
                                      archs=("sm_90",), kernels_dir=kernels)
    by = rows_by_kernel(rows)
    assert by[("block_sum<128u>", "sm_90")]["shared_bytes"] == 128 * 4
    assert by[("block_sum<32u>", "sm_90")]["shared_bytes"] == 32 * 4
    assert by[("scale", "sm_90")]["shared_bytes"] == 256 * 4
    assert by[("scale", "sm_90")]["defines"] == "BLOCK_DIM=256"


@needs_nvcc
def test_barriers_are_counted_where_ptxas_reports_them(kernels):
    rows = compilecheck.check_kernels([("ch/01_k.cu", {}, ())], archs=("sm_90",), kernels_dir=kernels)
    scale = rows_by_kernel(rows)[("scale", "sm_90")]
    assert scale["barriers"] in (None, 1)
    assert [r["kernel"] for r in rows] == ["scale"]      # an uninstantiated template has no code


@needs_nvcc
def test_syntax_error_names_file_and_line(kernels):
    with pytest.raises(CompileError) as info:
        compilecheck.check_kernels([("ch/02_broken.cu", {}, ())], archs=("sm_90",), kernels_dir=kernels)
    assert info.value.line == 4
    assert "02_broken.cu" in str(info.value)
    assert "02_broken.cu" in str(info.value.filename)


@needs_nvcc
def test_unknown_name_expression_is_named(kernels):
    with pytest.raises(CompileError, match="block_sun<128>"):
        compilecheck.check_kernels([("ch/01_k.cu", {}, ("block_sun<128>",))], archs=("sm_90",),
                                   kernels_dir=kernels)


def test_missing_file_is_reported(tmp_path):
    if not HAVE_NVCC:
        pytest.skip("nvcc not found")
    with pytest.raises(FileNotFoundError, match="nope.cu"):
        compilecheck.check_kernels([("nope.cu", {}, ())], kernels_dir=tmp_path)


def test_no_nvcc_says_to_install_the_toolkit(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with pytest.raises(BackendUnavailableError, match="install the CUDA toolkit"):
        compilecheck.check_kernels([("x.cu", {}, ())])


def test_parse_ptxas_without_barrier_counts():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooILi4EEvPf' for 'sm_80'
ptxas info    : Function properties for _Z3fooILi4EEvPf
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, 2048 bytes smem, 360 bytes cmem[0]
"""
    (row,) = compilecheck.parse_ptxas(log)
    assert row == {"kernel": "_Z3fooILi4EEvPf", "arch": "sm_80", "registers": 40, "shared_bytes": 2048,
                   "stack_bytes": 16, "spill_stores": 8, "spill_loads": 4, "barriers": None}


def test_kernel_name_drops_return_type_and_parameters():
    assert compilecheck.kernel_name("void reduce5<256u>(float const*, float*, unsigned int)") == "reduce5<256u>"
    assert compilecheck.kernel_name("void ns::k<(Op)1>(void (*)(int))") == "ns::k<(Op)1>"
    assert compilecheck.kernel_name("plain") == "plain"


def test_instantiation_source_keeps_line_numbers(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("line one\nline two\n")
    text = compilecheck.instantiation_source(src, ("k<4>",))
    lines = text.splitlines()
    assert lines[0] == f'#line 1 "{src}"' and lines[1:3] == ["line one", "line two"]
    assert lines[-1].endswith("pmpp_instantiate_0 = (void*)&k<4>;")


def test_arch_table_has_a_column_per_arch_and_the_reasons():
    ok = dict(file="a.cu", kernel="k", defines="", registers=12, shared_bytes=1024, spill_stores=8, spill_loads=4,
              status="ok", reason=None)
    rows = [{**ok, "arch": "sm_90"},
            dict(ok, arch="sm_80", kernel=None, registers=None, status="needs newer", reason="needs sm_90"),
            dict(ok, file="b.cu", arch="sm_80", kernel=None, status="failed", reason="b.cu:3: oops"),
            dict(ok, file="b.cu", arch="sm_90", kernel=None, status="failed", reason="b.cu:3: oops")]
    lines = compilecheck.format_arch_table(rows, ("sm_80", "sm_90")).splitlines()
    assert lines[0].split() == ["file", "kernel", "sm_80", "sm_90"]
    assert lines[2].split() == ["a.cu", "k", "needs", "sm_90", "12", "r", "1024", "B", "spill", "8+4", "B"]
    assert lines[3].split() == ["b.cu", "-", "FAILED", "[1]", "FAILED", "[2]"]
    assert lines[4:6] == ["[1] b.cu (sm_80): b.cu:3: oops", "[2] b.cu (sm_90): b.cu:3: oops"]
    assert compilecheck.arch_summary(rows, ("sm_80", "sm_90")) == {
        "sm_80": {"ok": 0, "needs newer": 1, "failed": 1}, "sm_90": {"ok": 1, "needs newer": 0, "failed": 1}}


def test_format_table_lines_up_columns():
    rows = [{"file": "a.cu", "kernel": "k<256u>", "arch": "sm_90", "registers": 12, "shared_bytes": 1024,
             "stack_bytes": 0, "spill_stores": 0, "spill_loads": 0, "barriers": None, "defines": ""}]
    lines = compilecheck.format_table(rows).splitlines()
    assert lines[0].split() == ["file", "kernel", "arch", "regs", "smem", "B", "stack", "B", "spill", "st", "B",
                                "spill", "ld", "B", "barriers"]
    assert lines[2].split() == ["a.cu", "k<256u>", "sm_90", "12", "1024", "0", "0", "0", "-"]
    assert len({len(l) for l in lines[:2]}) == 1


ATOMICS = """\
#include <cuda_fp16.h>
#ifndef ADD
#define ADD 1.0f
#endif
extern "C" __global__ void add_half(__half* out) { atomicAdd(out, __float2half(ADD)); }
extern "C" __global__ void add_float(float* out) { atomicAdd(out, ADD); }
template <int K>
__global__ void times(float* x) { x[threadIdx.x] *= K; }
"""

try:
    compilecheck.find_cuobjdump()
    HAVE_CUOBJDUMP = True
except BackendUnavailableError:
    HAVE_CUOBJDUMP = False

needs_sass_tools = pytest.mark.skipif(not (HAVE_NVCC and HAVE_CUOBJDUMP),
                                      reason="nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump) needed")


def sass_or_skip(*args, **kwargs):
    """cuobjdump -sass runs nvdisasm, which is another wheel (nvidia-cuda-nvdisasm)."""
    try:
        return compilecheck.sass(*args, **kwargs)
    except BackendUnavailableError as error:
        pytest.skip(str(error))


@needs_sass_tools
def test_sass_lists_each_kernel_with_its_atomics(tmp_path):
    import re
    (tmp_path / "atomics.cu").write_text(ATOMICS)
    listing = sass_or_skip(tmp_path / "atomics.cu", defines={"ADD": "2.0f"}, name_expressions=("times<3>",))
    functions = [line.split(":", 1)[1].strip() for line in listing.splitlines() if "Function :" in line]
    assert sorted(functions) == ["_Z5timesILi3EEvPf", "add_float", "add_half"]
    assert "sm_90" in listing and "/* 0x" not in listing            # hex encodings dropped
    assert re.search(r"ATOM\S*\.CAS", listing)                         # __half: a compare-and-swap loop
    assert re.search(r"(RED|ATOM)\S*\.ADD\S*\.F32", listing)           # float: a native atomic


@needs_sass_tools
def test_sass_of_a_broken_kernel_is_a_compile_error(kernels):
    with pytest.raises(CompileError) as info:
        compilecheck.sass(kernels / "ch" / "02_broken.cu")
    assert info.value.line == 4


def test_find_cuobjdump_falls_back_to_the_nvidia_wheel(monkeypatch, tmp_path):
    tool = tmp_path / "nvidia" / "cu13" / "bin" / "cuobjdump"
    tool.parent.mkdir(parents=True)
    tool.write_text("")

    class Wheel:
        files = [compilecheck.metadata.PackagePath("nvidia/cu13/bin/cuobjdump")]

    Wheel.files[0].dist = type("Dist", (), {"locate_file": staticmethod(lambda p: tmp_path / p)})()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(compilecheck.metadata, "distribution",
                        lambda name: Wheel if name == "nvidia-cuda-cuobjdump" else None)
    assert compilecheck.find_cuobjdump() == str(tool)


def test_no_cuobjdump_says_what_to_install(monkeypatch, tmp_path):
    def missing(name):
        raise compilecheck.metadata.PackageNotFoundError(name)

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(compilecheck.metadata, "distribution", missing)
    with pytest.raises(BackendUnavailableError, match="nvidia-cuda-cuobjdump"):
        compilecheck.find_cuobjdump()


@needs_nvcc
def test_one_report_is_kept_for_one_kernel_whatever_order_its_defines_come_in(tmp_path, monkeypatch):
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    text = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] = A * B; }\n'
    first = compilecheck.check_source(text, "sm_80", defines={"A": 2, "B": 3})
    again = compilecheck.check_source(text, "sm_80", defines={"B": 3, "A": 2})
    assert [r["registers"] for r in first] == [r["registers"] for r in again]
    assert len(list((tmp_path / "ptxas").glob("*.json"))) == 1
