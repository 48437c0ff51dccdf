/* device_launch_parameters.h shim for pmpp's CPU engine (threadIdx etc. are in the prelude). */
#include "pmpp_cuda.h"
