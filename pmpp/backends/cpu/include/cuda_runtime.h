/* cuda_runtime.h shim for pmpp's CPU engine: everything lives in the force-included prelude. */
#include "pmpp_cuda.h"
