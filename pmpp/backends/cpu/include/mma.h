/* mma.h shim for pmpp's CPU engine. */
#error "tensor-core matrix operations (<mma.h>, nvcuda::wmma) are not supported by pmpp's CPU engine"
