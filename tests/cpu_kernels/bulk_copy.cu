// One-dimensional bulk copies (cp.async.bulk, the CUDA Programming Guide's pattern): 256 floats
// into shared memory tracked by a cuda::barrier, each doubled, and back out in one copy.
// `size` and `offset` (floats) make the copy in wrong for the checks; `arrivals` > 1 makes the
// barrier expect more threads than arrive, `all_wait` has every thread arrive and wait.
#include <cuda/barrier>

typedef cuda::barrier<cuda::thread_scope_block> barrier;
namespace cde = cuda::device::experimental;

extern "C" __global__ void double_through_shared(const float* in, float* out, int size, int offset,
                                                 int arrivals, int all_wait) {
    __shared__ float4 in_s[64];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier arrived_s;
    unsigned int t = threadIdx.x;
    int bytes = size ? size : (int)sizeof(in_s);
    if (t == 0) {
        init(&arrived_s, all_wait ? blockDim.x : arrivals);
        cde::fence_proxy_async_shared_cta();
    }
    __syncthreads();
    if (t == 0) {
        cde::cp_async_bulk_global_to_shared(in_s, in + offset, bytes, arrived_s);
        arrived_s.wait(cuda::device::barrier_arrive_tx(arrived_s, 1, bytes));
    } else if (all_wait) {
        arrived_s.wait(arrived_s.arrive());
    }
    __syncthreads();
    float4 v = in_s[t];
    v.x *= 2; v.y *= 2; v.z *= 2; v.w *= 2;
    in_s[t] = v;
    cde::fence_proxy_async_shared_cta();
    __syncthreads();
    if (t == 0) {
        cde::cp_async_bulk_shared_to_global(out, in_s, sizeof(in_s));
        cde::cp_async_bulk_commit_group();
        cde::cp_async_bulk_wait_group_read<0>();
    }
}
