"""pmpp.occupancy: the occupancy calculator's arithmetic worked by hand, its table of GPUs, where a
kernel's registers come from (nvcc, or the recorded values without it), and, on a GPU, agreement
with the driver's own cuOccupancyMaxActiveBlocksPerMultiprocessor."""
import json
import re
import types

import pytest

import pmpp
from pmpp import compilecheck, occupancy as occ
from pmpp.errors import BackendUnavailableError, CompileError
from pmpp.occupancy import (GPUS, KernelResources, gpu_spec, gpu_spec_for_device_name, occupancy,
                            occupancy_from_resources)

HAVE_NVCC = compilecheck.nvcc_available()

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found: install the CUDA toolkit")
KB = 1024


@pytest.fixture
def no_nvcc(monkeypatch):
    """A machine without the CUDA toolkit (PATH is left alone: the CPU engine needs g++ and as)."""
    def missing():
        raise BackendUnavailableError("nvcc not found on PATH or in $CUDA_HOME/bin: install the CUDA toolkit")
    monkeypatch.setattr(compilecheck, "find_nvcc", missing)


def fake_function(filename, name, source="", defines=None, name_expressions=()):
    """What occupancy() reads of a pmpp.Function, without loading one."""
    module = types.SimpleNamespace(filename=filename, source=source, defines=dict(defines or {}),
                                   name_expressions=tuple(name_expressions))
    return types.SimpleNamespace(name=name, module=module)


# ---------------------------------------------------------------------------------------------
# The table of GPUs

def test_table_names_the_seven_gpus_with_their_arch():
    assert {name: spec.arch for name, spec in GPUS.items()} == {
        "T4": "sm_75", "A100": "sm_80", "RTX 3090": "sm_86", "RTX 4090": "sm_89", "L4": "sm_89",
        "H100": "sm_90", "H200": "sm_90"}


# The Programming Guide's technical specifications and cuda_occupancy.h, restated:
# (SMs, threads/SM, blocks/SM, shared KB/SM, opt-in KB/block, reserved B/block, shared unit B)
DOCUMENTED = {
    "T4": (40, 1024, 16, 64, 64, 0, 256),
    "A100": (108, 2048, 32, 164, 163, 1024, 128),
    "RTX 3090": (82, 1536, 16, 100, 99, 1024, 128),
    "RTX 4090": (128, 1536, 24, 100, 99, 1024, 128),
    "L4": (58, 1536, 24, 100, 99, 1024, 128),
    "H100": (132, 2048, 32, 228, 227, 1024, 128),
    "H200": (132, 2048, 32, 228, 227, 1024, 128),
}


@pytest.mark.parametrize("name", DOCUMENTED)
def test_table_matches_the_documented_limits(name):
    s = GPUS[name]
    assert (s.sm_count, s.max_threads_per_sm, s.max_blocks_per_sm, s.shared_per_sm // KB,
            s.max_shared_per_block_optin // KB, s.reserved_shared_per_block,
            s.shared_allocation_unit) == DOCUMENTED[name]
    assert s.max_warps_per_sm * 32 == s.max_threads_per_sm
    assert (s.registers_per_sm, s.max_registers_per_block, s.max_registers_per_thread) == (65536, 65536, 255)
    assert (s.register_allocation_unit, s.warp_allocation_granularity, s.max_threads_per_block) == (256, 4, 1024)
    assert s.shared_carveouts[-1] == s.shared_per_sm and list(s.shared_carveouts) == sorted(s.shared_carveouts)
    assert s.max_shared_per_block == 48 * KB


@pytest.mark.parametrize("alias, name", [
    ("h100", "H100"), ("H100 SXM", "H100"), ("sm_90", "H100"), ("NVIDIA H100 80GB HBM3", "H100"),
    ("t4", "T4"), ("Tesla T4", "T4"), ("SM_75", "T4"), ("a100", "A100"), ("NVIDIA A100-SXM4-40GB", "A100"),
    ("rtx-3090", "RTX 3090"), ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("sm_86", "RTX 3090"),
    ("geforce rtx 4090", "RTX 4090"), ("sm_89", "RTX 4090")])
def test_gpus_are_found_by_alias_whatever_the_case(alias, name):
    assert gpu_spec(alias).name == name


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"'V100'.*T4 \(sm_75\), A100 \(sm_80\), RTX 3090 \(sm_86\), "
                                         r"RTX 4090 \(sm_89\), L4 \(sm_89\), H100 \(sm_90\), H200 \(sm_90\)"):
        occupancy_from_resources(32, 0, 256, gpu="V100")


def test_device_name_maps_to_the_table_or_to_none():
    assert gpu_spec_for_device_name("NVIDIA H100 80GB HBM3") is GPUS["H100"]
    assert gpu_spec_for_device_name(b"NVIDIA GeForce RTX 4090") is GPUS["RTX 4090"]
    assert gpu_spec_for_device_name("NVIDIA H100 PCIe") is None       # 114 SMs: not the SXM part
    assert gpu_spec_for_device_name("NVIDIA B200") is None


# ---------------------------------------------------------------------------------------------
# The arithmetic, worked by hand from the documented limits

def test_h100_256_threads_32_registers_fills_the_sm():
    # warps: 256/32 = 8 per block; 64 per SM -> 8 blocks.
    # registers: 32 x 32 = 1,024 per warp (a multiple of 256); a quarter of the register file is
    # 16,384 -> 16 warps, x4 = 64 warps -> 8 blocks. A tie: both warps and registers limit.
    # shared: 0 + 0 + 1,024 reserved = 1,024 B; 233,472 / 1,024 -> 228 blocks. blocks: 32.
    o = occupancy_from_resources(registers=32, static_shared=0, block=256, gpu="H100")
    assert (o.blocks_per_sm, o.active_warps_per_sm, o.max_warps_per_sm, o.occupancy) == (8, 64, 64, 1.0)
    assert o.limiter == ("warps", "registers")
    assert o.block_limits == {"warps": 8, "registers": 8, "shared memory": 228, "blocks": 32}
    assert (o.warps_per_block, o.registers_per_block, o.shared_bytes_per_block, o.shared_bytes_per_sm) == \
        (8, 8192, 1024, 228 * KB)


def test_fewer_registers_leave_warps_the_only_limit():
    # 16 x 32 = 512 per warp -> 32 warps per quarter, 128 per SM -> 16 blocks: warps (8) alone limit.
    o = occupancy_from_resources(16, 0, 256, gpu="H100")
    assert (o.blocks_per_sm, o.limiter, o.block_limits["registers"]) == (8, ("warps",), 16)


def test_255_registers_leave_one_block_of_eight_warps():
    # 255 x 32 = 8,160 -> 8,192 per warp; 16,384 / 8,192 = 2 warps per quarter = 8 warps per SM:
    # one block of 8 warps, 8/64 = 12.5%.
    o = occupancy_from_resources(255, 0, 256, gpu="H100")
    assert (o.blocks_per_sm, o.active_warps_per_sm, o.occupancy, o.limiter) == (1, 8, 0.125, ("registers",))


def test_registers_are_allocated_per_sub_partition():
    # 192 x 32 = 6,144 per warp. A quarter (16,384) holds 2 such warps (not 2.67), so the SM holds
    # 8 warps = 4 blocks of 2 warps; dividing the whole file (65,536 / 12,288) would say 5.
    o = occupancy_from_resources(192, 0, 64, gpu="H100")
    assert (o.blocks_per_sm, o.limiter) == (4, ("registers",))


def test_100_kb_of_shared_memory():
    # 100 KB dynamic + 1 KB reserved = 103,424 B (a multiple of 128).
    # H100: 233,472 / 103,424 -> 2 blocks = 16 warps = 25%. A100: 167,936 / 103,424 -> 1 block = 12.5%.
    h100 = occupancy_from_resources(32, 0, 256, shared_mem=100 * KB, gpu="H100")
    assert (h100.blocks_per_sm, h100.occupancy, h100.limiter) == (2, 0.25, ("shared memory",))
    assert h100.shared_bytes_per_block == 103424
    a100 = occupancy_from_resources(32, 0, 256, shared_mem=100 * KB, gpu="A100")
    assert (a100.blocks_per_sm, a100.occupancy, a100.limiter) == (1, 0.125, ("shared memory",))
    # RTX 3090 and T4 allow 99 KB and 64 KB per block: 100 KB cannot launch.
    for gpu in ("RTX 3090", "T4"):
        with pytest.raises(ValueError, match="per block: ask for at most"):
            occupancy_from_resources(32, 0, 256, shared_mem=100 * KB, gpu=gpu)


def test_t4_holds_half_the_warps_of_an_h100():
    # T4: 32 warps per SM -> 4 blocks of 8 warps, still 100%; no reserved shared memory, so a
    # kernel without shared memory has no shared-memory limit. H100: 8 blocks.
    t4 = occupancy_from_resources(32, 0, 256, gpu="T4")
    assert (t4.blocks_per_sm, t4.active_warps_per_sm, t4.occupancy, t4.limiter) == (4, 32, 1.0, ("warps",))
    assert t4.block_limits == {"warps": 4, "registers": 8, "shared memory": None, "blocks": 16}
    assert occupancy_from_resources(32, 0, 256, gpu="H100").blocks_per_sm == 8
    # 1,024 threads: a whole T4 SM (100%), two thirds of an RTX 4090's (32 of 48 warps).
    assert occupancy_from_resources(32, 0, 1024, gpu="T4").occupancy == 1.0
    assert occupancy_from_resources(32, 0, 1024, gpu="RTX 4090").occupancy == pytest.approx(2 / 3)


@pytest.mark.parametrize("gpu", list(GPUS))
def test_1024_threads_with_65_registers_cannot_run(gpu):
    # 65 x 32 = 2,080 -> 2,304 per warp; x 32 warps = 73,728 > 65,536 registers a block may have.
    o = occupancy_from_resources(65, 0, 1024, gpu=gpu)
    assert (o.blocks_per_sm, o.active_warps_per_sm, o.occupancy, o.limiter) == (0, 0, 0.0, ("registers",))
    assert "73,728 registers" in o.why and "__launch_bounds__" in o.why
    assert "cannot run" in str(o)
    # 64 registers: 2,048 x 32 = 65,536 fits exactly -> one block.
    assert occupancy_from_resources(64, 0, 1024, gpu=gpu).blocks_per_sm == 1


def test_all_four_limits_can_tie():
    # H100, 64 threads (2 warps), 32 registers, 6,272 B dynamic: warps 64/2 = 32; registers
    # 64 warps / 2 = 32; shared 6,272 + 1,024 = 7,296 B, 233,472 / 7,296 = 32; blocks 32.
    o = occupancy_from_resources(32, 0, 64, shared_mem=6272, gpu="H100")
    assert (o.blocks_per_sm, o.limiter) == (32, ("warps", "registers", "shared memory", "blocks"))


def test_partial_warps_and_shared_memory_round_up():
    # (10, 10) = 100 threads = 4 warps (the last one partial): 64 / 4 = 16 blocks.
    o = occupancy_from_resources(16, 0, (10, 10), gpu="H100")
    assert (o.block_size, o.warps_per_block, o.blocks_per_sm) == (100, 4, 16)
    # 1 B of shared memory is allocated as 1 B + 1 KB reserved -> 1,152 (128-byte units) on the
    # H100, and as 256 B on the T4 (256-byte units, nothing reserved).
    assert occupancy_from_resources(16, 1, 32, gpu="H100").shared_bytes_per_block == 1152
    t4 = occupancy_from_resources(16, 1, 32, gpu="T4")
    assert (t4.shared_bytes_per_block, t4.block_limits["shared memory"]) == (256, 256)


def test_a_carveout_preference_shrinks_shared_memory():
    # 20 KB dynamic + 1 KB = 21,504 B. No preference: 228 KB -> 10 blocks, warps (8) limit.
    # carveout=50: 114 KB rounds up to the 132 KB option -> 135,168 / 21,504 = 6 blocks.
    # carveout=0: at least one block must fit: 21,504 rounds up to the 32 KB option -> 1 block.
    args = dict(registers=16, static_shared=0, block=256, shared_mem=20 * KB, gpu="H100")
    assert occupancy_from_resources(**args).blocks_per_sm == 8
    half = occupancy_from_resources(**args, carveout=50)
    assert (half.shared_bytes_per_sm, half.blocks_per_sm, half.limiter) == (132 * KB, 6, ("shared memory",))
    assert occupancy_from_resources(**args, carveout=0).blocks_per_sm == 1
    with pytest.raises(ValueError, match="percentage"):
        occupancy_from_resources(**args, carveout=101)


# Each limit reached on each GPU (blocks per SM):
#  warps:  256 threads, 16 registers: max warps / 8        -> T4 4, A100 8, 3090 6, 4090 6, H100 8
#  registers: 256 threads, 128 registers: 4,096 per warp, 4 warps per quarter = 16 per SM -> 2
#  shared: 128 threads, 16 registers, 32 KB dynamic (+1 KB reserved on 8.x/9.x):
#          T4 64/32 = 2; A100 164/33 = 4; 3090, 4090 100/33 = 3; H100 228/33 = 6
#  blocks: 32 threads, 16 registers: the maximum blocks per SM -> T4 16, A100 32, 3090 16, 4090 24, H100 32
EACH_LIMIT = {
    "warps": ((16, 0, 256, 0), {"T4": 4, "A100": 8, "RTX 3090": 6, "RTX 4090": 6, "L4": 6, "H100": 8, "H200": 8}),
    "registers": ((128, 0, 256, 0), {"T4": 2, "A100": 2, "RTX 3090": 2, "RTX 4090": 2, "L4": 2, "H100": 2, "H200": 2}),
    "shared memory": ((16, 0, 128, 32 * KB), {"T4": 2, "A100": 4, "RTX 3090": 3, "RTX 4090": 3, "L4": 3, "H100": 6, "H200": 6}),
    "blocks": ((16, 0, 32, 0), {"T4": 16, "A100": 32, "RTX 3090": 16, "RTX 4090": 24, "L4": 24, "H100": 32, "H200": 32}),
}


@pytest.mark.parametrize("gpu", list(GPUS))
@pytest.mark.parametrize("limit", list(EACH_LIMIT))
def test_each_limit_is_reached_on_each_gpu(limit, gpu):
    (registers, static, block, dynamic), blocks = EACH_LIMIT[limit]
    o = occupancy_from_resources(registers, static, block, dynamic, gpu=gpu)
    assert (o.blocks_per_sm, o.limiter) == (blocks[gpu], (limit,))
    assert o.occupancy == o.blocks_per_sm * o.warps_per_block / GPUS[gpu].max_warps_per_sm


# ---------------------------------------------------------------------------------------------
# What a launch may not ask for

@pytest.mark.parametrize("block, message", [
    (0, "dimension < 1"), ((32, 0), "dimension < 1"), (1025, "at most 1024 per block"),
    ((32, 32, 2), "2048 threads"), ((1, 1, 65), "exceeds CUDA's limit 64")])
def test_impossible_blocks_are_refused(block, message):
    with pytest.raises(ValueError, match=message):
        occupancy_from_resources(32, 0, block)


def test_impossible_resources_are_refused():
    with pytest.raises(ValueError, match="at most 255"):
        occupancy_from_resources(256, 0, 128)
    with pytest.raises(ValueError, match="registers must be a whole number"):
        occupancy_from_resources(-1, 0, 128)
    with pytest.raises(ValueError, match="shared_mem must be a whole number"):
        occupancy_from_resources(32, 0, 128, shared_mem=-4)
    with pytest.raises(ValueError, match=r"232,448 \(227 KB\) per block: ask for at most 230,400"):
        occupancy_from_resources(32, 2048, 128, shared_mem=228 * KB)


def test_occupancy_needs_a_kernel_or_its_numbers():
    with pytest.raises(TypeError, match="registers= and static_shared="):
        occupancy(None, 256)
    with pytest.raises(TypeError, match="cannot read a kernel's registers"):
        occupancy("SimpleSumReductionKernel", 256)


# ---------------------------------------------------------------------------------------------
# Asking about a kernel one describes

def test_what_if_a_kernel_used_64_registers():
    # 64 x 32 = 2,048 per warp -> 8 warps per quarter = 32 per SM = 4 blocks of 256: 50%.
    o = occupancy(None, 256, registers=64, static_shared=0, gpu="H100")
    assert (o.blocks_per_sm, o.occupancy, o.limiter, o.resources_from) == (4, 0.5, ("registers",), "given")
    described = occupancy(KernelResources(registers=64, static_shared_bytes=4096, name="tile"), 256)
    assert (described.kernel, described.static_shared_bytes, described.blocks_per_sm) == ("tile", 4096, 4)


def test_text_and_html_say_what_limits():
    o = occupancy(KernelResources(40, 2048, name="reduce5<256>"), (16, 16), shared_mem=1000, gpu="A100")
    text = str(o)
    assert len(text.splitlines()) == 2
    assert f"{o.blocks_per_sm} blocks/SM" in text and "occupancy" in text and "limited by registers" in text
    page = o._repr_html_()
    assert "reduce5&lt;256&gt;" in page and "<table>" in page and "reduce5<256>" not in page


# ---------------------------------------------------------------------------------------------
# A workbook kernel's registers: from nvcc

@needs_nvcc
def test_nvcc_reads_a_workbook_kernels_registers(monkeypatch):
    kernel = pmpp.load("reduction/03_shared_memory.cu", defines={"BLOCK_DIM": 256}).get_function(
        "SharedMemorySumReductionKernel")
    o = occupancy(kernel, 256, gpu="T4")
    [row] = compilecheck.check_source(kernel.module.source, "sm_75", defines={"BLOCK_DIM": 256})
    assert (o.registers_per_thread, o.static_shared_bytes) == (row["registers"], row["shared_bytes"])
    assert o.static_shared_bytes == 256 * 4              # __shared__ float input_s[BLOCK_DIM]
    assert o.resources_from.startswith("nvcc ") and "-arch=sm_75 (ptxas -v)" in o.resources_from
    assert o == occupancy_from_resources(row["registers"], row["shared_bytes"], 256, gpu="T4",
                                         kernel=kernel.name, resources_from=o.resources_from)
    # The compile is cached: asking again, for another block size, runs no nvcc.
    monkeypatch.setattr(compilecheck, "check_source", lambda *a, **k: pytest.fail("compiled twice"))
    assert occupancy(kernel, 128, gpu="T4").registers_per_thread == row["registers"]
    what_if = occupancy(kernel, 256, gpu="T4", registers=128)
    assert what_if.registers_per_thread == 128 and "registers=128 given" in what_if.resources_from


@needs_nvcc
def test_nvcc_finds_a_template_instance():
    kernel = pmpp.load("reduction/12_reduce5.cu", defines={"BLOCK_DIM": 256},
                       name_expressions=("reduce5<256>",)).get_function("reduce5<256>")
    o = occupancy(kernel, 256, shared_mem=256 * 4, gpu="H100")      # ptxas names it reduce5<256u>
    assert o.kernel == "reduce5<256>" and o.registers_per_thread > 0


@needs_nvcc
def test_a_kernel_that_does_not_compile_for_the_gpu_cannot_run_there():
    source = ('extern "C" __global__ void sum(const unsigned* x, unsigned* out) {\n'
              '    out[0] = __reduce_add_sync(0xffffffffu, x[threadIdx.x]);\n}\n')
    kernel = fake_function("<source>", "sum", source)
    assert occupancy(kernel, 32, gpu="A100").blocks_per_sm == 32      # redux.sync: sm_80 and newer
    with pytest.raises(CompileError, match=r"sum from <source> does not compile for the T4 \(sm_75\), "
                                           r"so it cannot run there"):
        occupancy(kernel, 32, gpu="T4")


@pytest.mark.parametrize("demangled", ["reduce5<256u>", "reduce5<(unsigned int)256>", "reduce5<256>",
                                       "reduce5< 256ul >"])
def test_demangled_template_names_match_name_expressions(demangled):
    # c++filt writes "reduce5<256u>", cu++filt "reduce5<(unsigned int)256>"
    assert occ._kernel_key(demangled) == occ._kernel_key("reduce5<256>") == "reduce5<256>"
    assert occ._kernel_key("KoggeStoneScan<__half>") == "KoggeStoneScan<__half>"
    assert occ._kernel_key("MaxPool3DUnrolled<2>") != occ._kernel_key("MaxPool3DUnrolled<3>")


# ---------------------------------------------------------------------------------------------
# Without nvcc: the recorded values

def recorded_row(filename, defines, kernel, arch):
    recording = occ.recorded_resources()
    rows = recording["kernels"][(filename, occ._defines_key(defines), arch)]
    return occ._find_kernel(rows, kernel)


def test_recorded_values_stand_in_for_nvcc(no_nvcc):
    kernel = pmpp.load("reduction/03_shared_memory.cu", defines={"BLOCK_DIM": 256}).get_function(
        "SharedMemorySumReductionKernel")
    o = occupancy(kernel, 256, gpu="H100")
    row = recorded_row("reduction/03_shared_memory.cu", {"BLOCK_DIM": 256}, kernel.name, "sm_90")
    assert (o.registers_per_thread, o.static_shared_bytes) == (row["registers"], row["shared_bytes"])
    assert o.resources_from.startswith("recorded in results/resources/nvcc-")
    assert "changed since" not in o.resources_from


def test_recording_covers_every_architecture_of_the_table():
    recording = occ.recorded_resources()
    assert recording is not None, "record them with pmpp.occupancy.record_resources()"
    archs = {key[2] for key in recording["kernels"]}
    assert archs == {spec.arch for spec in GPUS.values()}


def test_recorded_kernel_names_match_the_variants_names(no_nvcc):
    # Every kernel a recorded variant defines, template instances included ("reduce5<256>" is
    # recorded as "reduce5<256u>"), is found under the name pmpp.load gives it.
    from pmpp import chapters
    from pmpp.source import find_kernels
    recording = occ.recorded_resources()
    checked = 0
    for chapter in map(chapters.get, chapters.names()):
        for v in chapter.variants:
            path = chapter.kernel_path(v)
            key = (path, occ._defines_key(v.defines), "sm_90")
            if key not in recording["kernels"]:
                continue                       # changed since it was recorded
            text = (pmpp.kernels_dir() / path).read_text()
            names = [n for n, sig in find_kernels(text).items() if not sig.template_params]
            for name in names + list(v.name_expressions):
                assert occ._find_kernel(recording["kernels"][key], name) is not None, (path, name)
                checked += 1
    assert checked > 50


def test_recorded_failure_says_the_kernel_cannot_run(no_nvcc):
    recording = occ.recorded_resources()
    (filename, defines, arch), error = next(iter(recording["failures"].items()))
    spec = next(s for s in GPUS.values() if s.arch == arch)
    kernel = fake_function(filename, "AnyKernel", defines=dict(occ._parse_define(d) for d in defines.split()))
    with pytest.raises(CompileError, match=rf"does not compile for the {spec.name} \({arch}\), so it cannot "
                                           rf"run there: {re.escape(error)}"):
        occupancy(kernel, 256, gpu=spec)


def test_unrecorded_kernel_without_nvcc_says_to_install_it(no_nvcc):
    kernel = pmpp.load("reduction/03_shared_memory.cu", defines={"BLOCK_DIM": 128}).get_function(
        "SharedMemorySumReductionKernel")
    with pytest.raises(BackendUnavailableError, match="BLOCK_DIM=128 is not among.*install the CUDA toolkit"):
        occupancy(kernel, 128)
    assert occupancy(kernel, 128, registers=16, static_shared=512).blocks_per_sm == 16


def test_no_recording_and_no_nvcc_says_to_install_it(no_nvcc, monkeypatch, tmp_path):
    monkeypatch.setattr(occ, "RESOURCES_DIR", tmp_path)
    occ.recorded_resources.cache_clear()
    try:
        with pytest.raises(BackendUnavailableError, match="install the CUDA toolkit"):
            occupancy(fake_function("reduction/01_simple.cu", "SimpleSumReductionKernel"), 256)
    finally:
        occ.recorded_resources.cache_clear()


def test_an_edited_kernel_file_is_flagged(no_nvcc):
    text = (pmpp.kernels_dir() / "reduction/01_simple.cu").read_text()
    kernel = fake_function("reduction/01_simple.cu", "SimpleSumReductionKernel", text + "\n__device__ int edited;\n",
                           defines={"BLOCK_DIM": 256})
    assert "the .cu file has changed since" in occupancy(kernel, 256).resources_from


@needs_nvcc
def test_record_resources_writes_rows_and_failures(monkeypatch, tmp_path):
    from pmpp import chapters
    from pmpp.chapters import Variant
    variants = [Variant("01_simple", "simple", "test", None, None, defines={"BLOCK_DIM": 128}),
                Variant("12_reduce5", "reduce5", "test", None, None, defines={"BLOCK_DIM": 64},
                        name_expressions=("reduce5<64>",), min_arch=90)]
    chapter = types.SimpleNamespace(variants=variants, kernel_path=lambda v: f"reduction/{v.name}.cu")
    monkeypatch.setattr(chapters, "names", lambda: ["reduction"])
    monkeypatch.setattr(chapters, "get", lambda name: chapter)
    path = occ.record_resources(tmp_path / "nvcc-test.json", archs=("sm_80", "sm_90"))
    recording = occ.recorded_resources(path)
    assert sorted(recording["kernels"]) == [("reduction/01_simple.cu", "BLOCK_DIM=128", "sm_80"),
                                            ("reduction/01_simple.cu", "BLOCK_DIM=128", "sm_90"),
                                            ("reduction/12_reduce5.cu", "BLOCK_DIM=64", "sm_90")]
    assert recording["failures"] == {("reduction/12_reduce5.cu", "BLOCK_DIM=64", "sm_80"):
                                     "the variant needs sm_90 or newer (its min_arch)"}
    [row] = recording["kernels"][("reduction/12_reduce5.cu", "BLOCK_DIM=64", "sm_90")]
    assert occ._kernel_key(row["kernel"]) == "reduce5<64>" and row["registers"] > 0
    assert recording["nvcc"] == occ._nvcc_version(compilecheck.find_nvcc())[0]
    assert set(recording["sources"]) == {"reduction/01_simple.cu", "reduction/12_reduce5.cu"}


# ---------------------------------------------------------------------------------------------
# On a GPU: the driver agrees

@pytest.mark.gpu
def test_occupancy_matches_the_driver():
    import cupy
    from pmpp import chapters
    from pmpp.backends.gpu import allow_dynamic_shared
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    spec = gpu_spec_for_device_name(props["name"])
    if spec is None:
        pytest.skip(f"{props['name']!r} is not in pmpp.occupancy.GPUS")
    assert (props["multiProcessorCount"], props["maxThreadsPerMultiProcessor"], props["regsPerMultiprocessor"],
            props["sharedMemPerMultiprocessor"], props["sharedMemPerBlockOptin"],
            props["reservedSharedMemPerBlock"], props["maxBlocksPerMultiProcessor"]) == \
        (spec.sm_count, spec.max_threads_per_sm, spec.registers_per_sm, spec.shared_per_sm,
         spec.max_shared_per_block_optin, spec.reserved_shared_per_block, spec.max_blocks_per_sm)
    compared, kernels, wrong = 0, set(), []
    for chapter in map(chapters.get, chapters.names()):
        for v in chapter.variants:
            if v.too_old_gpu() is not None:
                continue
            module = pmpp.load(chapter.kernel_path(v), backend="cupy", defines=v.defines,
                               name_expressions=v.name_expressions)
            for name in module.kernel_names:
                raw = module._impl._function(name)
                for block in (32, 96, 128, 256, 512, 1024):
                    if block > raw.max_threads_per_block:          # __launch_bounds__
                        continue
                    for dynamic in (0, 1000, 20 * KB, 64 * KB, 150 * KB):
                        if raw.shared_size_bytes + dynamic > spec.max_shared_per_block_optin:
                            continue
                        allow_dynamic_shared(raw, name, dynamic, spec.max_shared_per_block_optin)
                        driver = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                            raw.kernel.ptr, block, dynamic)
                        ours = occupancy(raw, block, dynamic, gpu=spec)
                        if ours.blocks_per_sm != driver:
                            wrong.append(f"{chapter.kernel_path(v)} {name} block={block} shared_mem={dynamic}: "
                                         f"driver {driver}, ours {ours.blocks_per_sm} ({ours})")
                        compared += 1
                kernels.add((chapter.kernel_path(v), name))
    assert not wrong, f"{len(wrong)} of {compared} differ:\n" + "\n".join(wrong[:20])
    assert len(kernels) >= 6 and compared >= 100
    print(f"occupancy() agreed with the driver on {compared} launches of {len(kernels)} kernels")


@pytest.mark.gpu
@pytest.mark.parametrize("carveout", [0, 25, 50, 100])
def test_carveout_preference_matches_the_driver(carveout):
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    spec = gpu_spec_for_device_name(props["name"])
    if spec is None:
        pytest.skip(f"{props['name']!r} is not in pmpp.occupancy.GPUS")
    source = ('extern "C" __global__ void copy(const float* x, float* y) {\n'
              '    extern __shared__ float s[];\n'
              '    s[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n'
              '    y[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];\n}\n')
    raw = cupy.RawKernel(source, "copy")
    raw.max_dynamic_shared_size_bytes = spec.max_shared_per_block_optin
    raw.preferred_shared_memory_carveout = carveout
    for block in (64, 256, 1024):
        for dynamic in (0, 4 * KB, 20 * KB, 40 * KB, 90 * KB, 150 * KB):
            if dynamic > spec.max_shared_per_block_optin:
                continue
            driver = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(raw.kernel.ptr, block, dynamic)
            ours = occupancy(raw, block, dynamic, gpu=spec, carveout=carveout)
            assert ours.blocks_per_sm == driver, (block, dynamic, str(ours))


def recorded_launches():
    """Every kernel launch in the Nsight Compute counters recordings: (GPU name, block, dynamic
    shared, registers, static shared, ncu's limits)."""
    from pmpp.profiling import ncu as ncu_recordings
    from pmpp.results import RESULTS_DIR
    import json
    found = []
    for path in sorted((RESULTS_DIR / "counters").glob("*.json")):
        data = json.loads(path.read_text())
        spec = gpu_spec_for_device_name(data["device"]["name"])
        if spec is None:
            continue
        for profile in data["profiles"].values():
            for group in profile.get("variants", profile.get("cases", [])):
                for launch in group["launches"]:
                    m = launch["metrics"]
                    if "launch__occupancy_limit_registers" in m:
                        found.append((spec.name, launch["block"], int(m["launch__shared_mem_per_block_dynamic"]),
                                      int(m["launch__registers_per_thread"]), int(m["launch__shared_mem_per_block_static"]),
                                      {name: int(m[f"launch__occupancy_limit_{key}"]) for name, key in
                                       (("registers", "registers"), ("shared memory", "shared_mem"),
                                        ("warps", "warps"), ("blocks", "blocks"))}))
    assert ncu_recordings.recorded("cases") is not None
    return found


def test_blocks_per_sm_match_nsight_compute_for_every_recorded_launch():
    """Nsight Compute reports, for each launch it profiled, how many blocks each resource allows;
    the calculator, given the same registers and shared memory, must find the same blocks per SM
    and, where registers or warps bind, the same limit. (ncu's shared-memory limit is the one of
    the carveout the driver chose for that launch, which can be smaller than the calculator's
    default of the SM's whole capacity when shared memory does not bind.)"""
    launches = recorded_launches()
    assert len(launches) > 100
    for gpu, block, dynamic, registers, static, limits in launches:
        occ = occupancy_from_resources(registers, static, tuple(block), dynamic, gpu=gpu)
        assert occ.blocks_per_sm == min(limits.values()), (gpu, block, dynamic, registers, static, limits)
        for name in ("registers", "warps"):
            if occ.block_limits[name] is not None and occ.block_limits[name] <= occ.blocks_per_sm:
                assert limits[name] == occ.block_limits[name], (name, gpu, block, registers, static, limits)


def test_the_source_digest_ignores_comments_and_layout_but_not_code():
    from pmpp.occupancy import _digest
    code = 'int f(int x) {\n    return x + 1;  // one more\n}\nconst char* s = "// kept";\n'
    assert _digest(code) == _digest("/* a header */\n" + code.replace("  // one more", "")
                                    .replace("    ", "\t"))
    assert _digest(code) != _digest(code.replace("x + 1", "x + 2"))
    assert _digest(code) != _digest(code.replace('"// kept"', '"// gone"'))


def test_recorded_resources_describe_the_kernels_as_they_are():
    from pmpp.occupancy import RESOURCES_DIR, source_digest
    for path in RESOURCES_DIR.glob("nvcc-*.json"):
        sources = json.loads(path.read_text())["sources"]
        stale = [f for f, digest in sources.items() if source_digest(f) != digest]
        assert not stale, f"{path.name}: re-record with pmpp.occupancy.record_resources() where nvcc is: {stale}"
