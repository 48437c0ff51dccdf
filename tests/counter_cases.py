"""The launches of tests/kernels/counters.cu whose counters are known by hand, with those counts.

Every case is 4 blocks of 256 threads: 32 full warps. The same cases are profiled with Nsight
Compute on a GPU (``pmpp.ncu.profile_cases``, recorded in results/counters/) and counted by the
CPU engine (tests/test_counters.py).
"""
from pathlib import Path

KERNEL_FILE = Path(__file__).parent / "kernels" / "counters.cu"
GRID, BLOCK = 4, 256
N = GRID * BLOCK          # threads
WARPS = N // 32           # 32

LD_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
LD_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
ST_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
ST_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
ATOM_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"
ATOM_SECT = "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum"
SH_LD = "smsp__sass_inst_executed_op_shared_ld.sum"
SH_LD_WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SH_LD_CONF = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SH_ST = "smsp__sass_inst_executed_op_shared_st.sum"
SH_ST_WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
SH_ST_CONF = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SH_ATOM = "smsp__sass_inst_executed_op_shared_atom.sum"


def _case(name, kernel, args, expected):
    return {"name": name, "kernel": kernel, "grid": [GRID], "block": [BLOCK], "args": args, "expected": expected}


def _float_out(size=N):
    return ["zeros", "float32", size]


CASES = [
    # 32 lanes x 4 bytes, consecutive: 4 sectors a request; `stride` apart: 4 * stride, at most 32.
    *[_case(f"strided_load_{s}", "StridedLoad", [["random", "float32", N * s], _float_out(), ["scalar", "int32", s]],
            {LD_REQ: WARPS, LD_SECT: WARPS * min(4 * s, 32), ST_REQ: WARPS, ST_SECT: WARPS * 4})
      for s in (1, 2, 32)],
    # 32 lanes x 16 bytes = 512 bytes: 16 sectors a request, for the load and the store.
    _case("float4_copy", "Float4Copy", [["random", "float32", 4 * N], _float_out(4 * N)],
          {LD_REQ: WARPS, LD_SECT: WARPS * 16, ST_REQ: WARPS, ST_SECT: WARPS * 16}),
    # One address for the whole warp: one sector.
    _case("broadcast_load", "BroadcastLoad", [["random", "float32", N], _float_out()],
          {LD_REQ: WARPS, LD_SECT: WARPS, ST_REQ: WARPS, ST_SECT: WARPS * 4}),
    # The 16 even lanes still span the warp's 128 bytes: 4 sectors, with half the lanes.
    _case("even_lanes", "EvenLanes", [["random", "float32", N], _float_out()],
          {LD_REQ: WARPS, LD_SECT: WARPS * 4, ST_REQ: WARPS, ST_SECT: WARPS * 4}),
    # 16 lanes read in[i + k], k = 0..7: 64 bytes from i + k, 2 sectors for k = 0 and 3 after
    # (misaligned): 2 + 7 * 3 = 23 sectors for 8 requests per warp; the store: 2 sectors.
    _case("half_warp_loop", "HalfWarpLoop", [["random", "float32", N + 8], _float_out(), ["scalar", "int32", 8]],
          {LD_REQ: WARPS * 8, LD_SECT: WARPS * 23, ST_REQ: WARPS, ST_SECT: WARPS * 2}),
    # Lane l reads word l * stride: `stride` lanes per bank, so `stride` wavefronts (32 at most).
    # The fill before: 4 conflict-free stores per warp (1024 floats, 256 threads).
    *[_case(f"shared_stride_{s}", "SharedStride", [_float_out(), ["scalar", "int32", s]],
            {SH_LD: WARPS, SH_LD_WF: WARPS * s, SH_LD_CONF: WARPS * (s - 1), SH_ST: WARPS * 4, SH_ST_WF: WARPS * 4,
             SH_ST_CONF: 0})
      for s in (1, 2, 32)],
    # The same for stores, by the first warp of each block only (4 warps).
    *[_case(f"shared_store_stride_{s}", "SharedStoreStride", [_float_out(), ["scalar", "int32", s]],
            {SH_ST: GRID, SH_ST_WF: GRID * s, SH_ST_CONF: GRID * (s - 1), SH_LD: WARPS, SH_LD_WF: WARPS})
      for s in (1, 2, 32)],
    # Every lane on one word: a broadcast, one wavefront.
    _case("shared_broadcast", "SharedBroadcast", [_float_out()], {SH_LD: WARPS, SH_LD_WF: WARPS, SH_LD_CONF: 0}),
    # 8-byte loads, per half-warp: 2 wavefronts; at stride 2 two lanes of a half-warp share banks: 4.
    *[_case(f"shared_float2_{s}", "SharedFloat2", [_float_out(2 * N), ["scalar", "int32", s]],
            {SH_LD: WARPS, SH_LD_WF: WARPS * 2 * s, SH_LD_CONF: WARPS * 2 * (s - 1)}) for s in (1, 2)],
    # 16-byte loads, per quarter-warp: 4 wavefronts; 8 at stride 2.
    *[_case(f"shared_float4_{s}", "SharedFloat4", [_float_out(4 * N), ["scalar", "int32", s]],
            {SH_LD: WARPS, SH_LD_WF: WARPS * 4 * s, SH_LD_CONF: WARPS * 4 * (s - 1)}) for s in (1, 2)],
    # Atomics on threadIdx.x % bins: the bins fit one sector up to 8 of them, 4 sectors for 32;
    # lanes on one address are served one pass each, and a sector counts once per pass: 32 passes
    # for 1 bin, 5 for 7 bins (lanes 0, 7, 14, 21, 28 on bin 0), 1 for 32 bins.
    *[_case(f"atomic_bins_{b}", "AtomicBins", [["zeros", "uint32", 32], ["scalar", "int32", b]],
            {ATOM_REQ: WARPS, ATOM_SECT: WARPS * {1: 32, 7: 5, 32: 4}[b],
             "engine__atomics.sum": N,
             "engine__atomic_lanes_per_address.ratio": 32 / min(b, 32),
             # bin 0 gets threads 0, b, 2b, ... of each block: ceil(256 / b) of them, 4 blocks
             "engine__atomic_max_updates_per_address": GRID * -(-BLOCK // b)})
      for b in (1, 7, 32)],
    # Shared-memory atomics into private bins, then one global atomic per bin and block.
    *[_case(f"shared_atomic_bins_{b}", "SharedAtomicBins", [["zeros", "uint32", 32], ["scalar", "int32", b]],
            {SH_ATOM: WARPS, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum": WARPS, ATOM_REQ: GRID,
             "engine__atomics.sum": N + GRID * b,
             "engine__atomic_shared_max_updates_per_address": -(-BLOCK // b)})
      for b in (1, 7)],
]


if __name__ == "__main__":   # on a GPU with Nsight Compute: python tests/counter_cases.py [recording.json]
    import sys

    from pmpp.profiling import ncu

    profiled = ncu.profile_cases(CASES, KERNEL_FILE)
    path = ncu.write_recording(sys.argv[1] if len(sys.argv) > 1 else None, "cases", profiled)
    print(f"{len(profiled['cases'])} cases, ncu refused {profiled['refused'] or 'nothing'}; wrote {path}")
