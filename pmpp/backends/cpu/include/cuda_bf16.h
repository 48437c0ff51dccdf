/* cuda_bf16.h shim for pmpp's CPU engine. */
#error "bfloat16 (<cuda_bf16.h>, __nv_bfloat16) is not supported by pmpp's CPU engine: use __half (<cuda_fp16.h>) or float"
