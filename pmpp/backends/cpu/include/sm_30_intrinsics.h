/* sm_30_intrinsics.h shim for pmpp's CPU engine: what CUDA declares here lives in the force-included prelude. */
#include "pmpp_cuda.h"
