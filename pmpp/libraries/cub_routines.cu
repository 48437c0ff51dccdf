// CUB's device-wide routines, called directly: the bars the reduction, scan and histogram
// chapters measure their kernels against.
//
// Built by pmpp.libraries.cub with the local nvcc into a shared library and called through ctypes.
// Every routine follows CUB's two-call convention (CUB documentation, "Device-wide primitives"):
// with temp == nullptr it only writes the temporary storage it needs into *temp_bytes; with
// temp set it runs on `stream`. Pointers are device pointers. Each returns a cudaError_t.
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/version.cuh>
#include <thrust/iterator/transform_iterator.h>

#include <climits>
#include <cstdint>

namespace {

constexpr int kLetterBins = 7;               // the chapter's letters: a-d, e-h, ..., u-x, y-z
constexpr unsigned char kNotALetter = kLetterBins;   // outside [0, 7): CUB does not count it

// The letter bin of a byte, as the chapter's kernels compute it: alphabet position / 4.
struct LetterBin {
    __host__ __device__ unsigned char operator()(unsigned char c) const {
        const unsigned position = c - static_cast<unsigned>('a');
        return position < 26 ? static_cast<unsigned char>(position / 4) : kNotALetter;
    }
};

// CUB picks its offset type from the count's type: 32-bit offsets where n allows them.
template <typename Run>
cudaError_t with_count(long long n, Run run) {
    if (n <= INT_MAX) return run(static_cast<int>(n));
    return run(static_cast<long long>(n));
}

}  // namespace

extern "C" {

int pmpp_cub_version() { return CUB_VERSION; }

const char* pmpp_cub_error_string(int error) {
    return cudaGetErrorString(static_cast<cudaError_t>(error));
}

int pmpp_cub_reduce_sum_f32(void* temp, size_t* temp_bytes, const float* in, float* out,
                            long long n, cudaStream_t stream) {
    return with_count(n, [&](auto count) {
        return cub::DeviceReduce::Sum(temp, *temp_bytes, in, out, count, stream);
    });
}

int pmpp_cub_reduce_max_f32(void* temp, size_t* temp_bytes, const float* in, float* out,
                            long long n, cudaStream_t stream) {
    return with_count(n, [&](auto count) {
        return cub::DeviceReduce::Max(temp, *temp_bytes, in, out, count, stream);
    });
}

#define PMPP_CUB_SCAN(NAME, ROUTINE, T)                                                         \
    int NAME(void* temp, size_t* temp_bytes, const T* in, T* out, long long n,                 \
             cudaStream_t stream) {                                                            \
        return with_count(n, [&](auto count) {                                                 \
            return cub::DeviceScan::ROUTINE(temp, *temp_bytes, in, out, count, stream);        \
        });                                                                                    \
    }

PMPP_CUB_SCAN(pmpp_cub_inclusive_sum_f32, InclusiveSum, float)
PMPP_CUB_SCAN(pmpp_cub_inclusive_sum_i32, InclusiveSum, int)
PMPP_CUB_SCAN(pmpp_cub_exclusive_sum_f32, ExclusiveSum, float)
PMPP_CUB_SCAN(pmpp_cub_exclusive_sum_i32, ExclusiveSum, int)

// 256 bins, one per byte value: levels 0, 1, ..., 256 (int: 256 does not fit a byte).
int pmpp_cub_histogram_bytes(void* temp, size_t* temp_bytes, const unsigned char* in,
                             unsigned int* bins, long long n, cudaStream_t stream) {
    return with_count(n, [&](auto count) {
        return cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, in, bins, 257, 0, 256,
                                                   count, stream);
    });
}

// The 7 letter bins: each byte mapped to its letter bin (7 for any other byte) on the way in,
// then 7 equal bins over [0, 7).
int pmpp_cub_histogram_letters(void* temp, size_t* temp_bytes, const unsigned char* in,
                               unsigned int* bins, long long n, cudaStream_t stream) {
    thrust::transform_iterator<LetterBin, const unsigned char*> letters(in, LetterBin{});
    return with_count(n, [&](auto count) {
        return cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, letters, bins,
                                                   kLetterBins + 1, 0, kLetterBins, count, stream);
    });
}

}  // extern "C"
