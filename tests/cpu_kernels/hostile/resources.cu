// Kernels that take more than their share.
#include <cstdio>

// 100 GB in 1 GB pieces, one byte of each touched: address space, hardly any memory.
__global__ void allocate_100gb(int *done) {
    static char *pieces[100];
    for (int i = 0; i < 100; ++i) {
        pieces[i] = new char[1ull << 30];
        pieces[i][0] = 1;
        ++done[0];
    }
    for (int i = 0; i < 100; ++i) delete[] pieces[i];
}

__global__ void print_forever(int *done) {
    for (unsigned long i = 0;; ++i) {
        printf("line %lu of a kernel that prints forever\n", i);
        done[0] = 1;
    }
}
