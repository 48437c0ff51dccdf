"""The GPUs from the T4 to the H100: each one's launch limits, the CPU engine enforcing a chosen
one ($PMPP_TARGET, CpuModule(target=...)), and every chapter's launches fitting each of them."""
import numpy as np
import pytest

from pmpp import chapters, compilecheck, exercises, occupancy, runner, targets
from pmpp.backends.cpu import CpuModule
from pmpp.loader import Function

KB = 1024

# 4 KiB of static __shared__ memory, and whatever dynamic shared memory the launch asks for
SHARED_TILE = """
__global__ void tiled(float* x) {
    extern __shared__ float dyn[];
    __shared__ float tile[1024];
    tile[threadIdx.x] = x[threadIdx.x];
    dyn[threadIdx.x] = tile[threadIdx.x] + 1.0f;
    __syncthreads();
    x[threadIdx.x] = dyn[threadIdx.x];
}
"""


def test_targets_run_from_the_t4_to_the_h100_oldest_first():
    assert targets.ARCHS == ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
    assert [targets.target(a).name for a in targets.ARCHS] == ["T4", "A100", "RTX 3090", "RTX 4090", "H100"]


def test_a_target_is_named_by_arch_number_or_gpu():
    assert targets.target("75") is targets.target("sm_75") is targets.target("T4")
    with pytest.raises(ValueError, match="sm_75, sm_80, sm_86, sm_89, sm_90"):
        targets.target("sm_61")


def test_limits_come_from_the_occupancy_table():
    """One table for both: what a launch may use is what the occupancy arithmetic assumes."""
    for arch in targets.ARCHS:
        assert targets.target(arch) is occupancy.gpu_spec(arch)
        assert targets.engine_limits(targets.target(arch))[:2] == (
            occupancy.gpu_spec(arch).max_threads_per_block, occupancy.gpu_spec(arch).max_shared_per_block_optin)


def test_opt_in_shared_memory_is_at_least_the_default_and_sm75_has_the_least():
    optin = {a: targets.target(a).max_shared_per_block_optin for a in targets.ARCHS}
    assert all(v >= targets.target(a).max_shared_per_block for a, v in optin.items())
    assert min(optin, key=optin.get) == "sm_75"
    assert max(optin, key=optin.get) == "sm_90"


def test_a_launch_over_the_t4s_shared_memory_is_refused_there_and_fits_the_h100():
    t4, h100 = targets.target("sm_75"), targets.target("sm_90")
    wanted = t4.max_shared_per_block_optin + 36 * KB
    (problem,) = targets.launch_problems(t4, 256, static_shared=0, dynamic_shared=wanted)
    assert f"{wanted // KB} KiB of shared memory per block" in problem
    assert f"sm_75 (T4) allows at most {t4.max_shared_per_block_optin // KB} KiB: use a smaller tile" in problem
    assert targets.launch_problems(h100, 256, static_shared=0, dynamic_shared=wanted) == []


def test_too_many_registers_for_the_block_is_a_problem_on_every_target():
    for arch in targets.ARCHS:
        spec = targets.target(arch)
        per_thread = spec.max_registers_per_block // spec.max_threads_per_block
        assert targets.launch_problems(spec, 1024, registers=per_thread) == []
        (problem,) = targets.launch_problems(spec, 1024, registers=2 * per_thread)
        assert f"on {targets.label(spec)}" in problem and "__launch_bounds__(1024)" in problem


def test_check_launch_names_the_kernel_and_every_broken_limit():
    with pytest.raises(targets.LaunchLimitError, match=r"tiled cannot launch on sm_75 \(T4\): .*smaller tile"):
        targets.check_launch(targets.target("T4"), 128, 4 * KB, 96 * KB, kernel="tiled")


# ---- the CPU engine enforcing a target --------------------------------------------------------

def launch_tiled(module, dynamic_shared):
    x = np.arange(256, dtype=np.float32)
    module.launch("tiled", (1, 1, 1), (256, 1, 1), dynamic_shared, [x], ["x"], [True])
    return x


@pytest.fixture(scope="module")
def tiled_source():
    return '#line 1 "tiled.cu"\n' + SHARED_TILE


def test_engine_refuses_shared_memory_over_the_t4s_limit_and_runs_it_as_an_h100(tiled_source, monkeypatch):
    over = targets.target("sm_75").max_shared_per_block_optin     # + 4 KiB static: 4 KiB too many
    module = CpuModule(tiled_source, filename="tiled.cu", kernel_names=("tiled",))
    monkeypatch.setenv("PMPP_TARGET", "sm_75")
    with pytest.raises(ValueError) as refused:
        launch_tiled(module, over)
    message = str(refused.value)
    assert "kernel 'tiled' uses 68 KiB of shared memory per block (4096 bytes static" in message
    assert "sm_75 (T4) allows at most 64 KiB: use a smaller tile" in message
    monkeypatch.setenv("PMPP_TARGET", "sm_90")
    np.testing.assert_array_equal(launch_tiled(module, over), np.arange(256) + 1)
    monkeypatch.delenv("PMPP_TARGET")
    np.testing.assert_array_equal(launch_tiled(module, over), np.arange(256) + 1)


def test_engine_target_option_and_dynamic_shared_memory_alone(tiled_source, monkeypatch):
    monkeypatch.delenv("PMPP_TARGET", raising=False)
    module = CpuModule(tiled_source, filename="tiled.cu", kernel_names=("tiled",), target="T4")
    with pytest.raises(ValueError, match=r"asks for 100 KiB of dynamic shared memory per block; "
                                         r"sm_75 \(T4\) allows at most 64 KiB: use a smaller tile"):
        launch_tiled(module, 100 * KB)
    np.testing.assert_array_equal(launch_tiled(module, 60 * KB), np.arange(256) + 1)   # 64 KiB in all


def test_an_unknown_target_in_the_environment_says_what_to_set(tiled_source, monkeypatch):
    module = CpuModule(tiled_source, filename="tiled.cu", kernel_names=("tiled",))
    monkeypatch.setenv("PMPP_TARGET", "sm_61")
    with pytest.raises(ValueError, match=r"\$PMPP_TARGET: unknown target 'sm_61'.*or unset it"):
        launch_tiled(module, 0)


# ---- every chapter's launches, under each target ----------------------------------------------

def small_problem(chapter):
    """The chapter's CPU problem, at its largest awkward test size up to 100 000 elements."""
    problem = dict(chapter.problems["cpu"])
    if "n" in problem and chapter.test_sizes:
        problem["n"] = max(s for s in chapter.test_sizes if s <= min(problem["n"], 100_000))
    return problem


def cpu_variants(arch):
    """The variants the CPU engine runs that a GPU of ``arch`` can run too (its min_arch)."""
    for name in chapters.names():
        chapter = chapters.get(name)
        for variant in chapter.variants:
            if variant.min_arch <= compilecheck.arch_number(arch) and exercises.implemented(chapter, [variant]) \
                    and variant.supports(runner.problem_for(variant, small_problem(chapter)), "cpu"):
                yield chapter, variant


_RUNS: dict[str, tuple[list, list]] = {}    # arch -> (refused variants, launches made), run once


def run_every_variant(arch, monkeypatch):
    """Run every chapter's variants for ``arch`` on the CPU engine at a small size with
    $PMPP_TARGET=arch: the variants the engine refused (with why) and every launch made:
    (function, block, shared_mem)."""
    if arch not in _RUNS:
        launches, refused = [], []
        call = Function.__call__

        def recording(self, grid, block, args, shared_mem=0):
            launches.append((self, block, shared_mem))
            return call(self, grid, block, args, shared_mem)

        monkeypatch.setattr(Function, "__call__", recording)
        monkeypatch.setenv("PMPP_TARGET", arch)
        for chapter, variant in cpu_variants(arch):
            try:
                runner.verify(chapter, variant, small_problem(chapter), backend="cpu", seed=1)
            except ValueError as error:
                refused.append(f"{chapter.name}/{variant.name}: {error}")
        monkeypatch.undo()
        _RUNS[arch] = refused, launches
    return _RUNS[arch]


@pytest.mark.slow
@pytest.mark.parametrize("arch", targets.ARCHS)
def test_every_chapters_launches_fit_the_targets_threads_and_shared_memory(arch, monkeypatch):
    refused, launches = run_every_variant(arch, monkeypatch)
    assert refused == [], "\n".join(refused)
    launched = {function.module.filename.split("/")[0] for function, *_ in launches}
    assert launched == {chapter.kernel_dir for chapter, _ in cpu_variants(arch)}


@pytest.mark.slow
@pytest.mark.skipif(not compilecheck.nvcc_available(), reason="nvcc not found: install the CUDA toolkit")
@pytest.mark.parametrize("arch", targets.ARCHS)
def test_every_chapters_launches_fit_the_targets_registers(arch, monkeypatch):
    """Registers per thread from nvcc's report for the arch, times the threads of each launch."""
    spec = targets.target(arch)
    _, launches = run_every_variant(arch, monkeypatch)
    problems = set()
    for function, block, shared_mem in {(f, str(b), s): (f, b, s) for f, b, s in launches}.values():
        used = occupancy.kernel_resources(function, spec)
        for problem in targets.launch_problems(spec, block, used.static_shared_bytes, shared_mem, used.registers):
            problems.add(f"{function.module.filename} {function.name} block {block}: {problem}")
    assert problems == set(), "\n".join(sorted(problems))
