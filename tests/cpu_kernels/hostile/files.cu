// Kernels that touch files: TARGET is a path given with -DTARGET="...".
#include <cstdio>
#include <unistd.h>

__global__ void write_file(int *done) {
    FILE *f = fopen(TARGET, "w");
    if (f) {
        fputs("written by a kernel\n", f);
        fclose(f);
        done[0] = 1;
    }
}

__global__ void delete_file(int *done) {
    done[0] = unlink(TARGET) == 0;
}
