/* cooperative_groups.h shim for pmpp's CPU engine. */
#error "cooperative groups (<cooperative_groups.h>) are not supported by pmpp's CPU engine: use __syncthreads() and the __*_sync warp intrinsics"
