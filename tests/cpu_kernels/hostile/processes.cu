// Kernels that start processes: TARGET is a path given with -DTARGET="...".
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TARGET
#define TARGET "/nonexistent/pmpp-test"
#endif

__global__ void run_shell(int *done) {
    done[0] = system("touch " TARGET) == 0;
}

__global__ void exec_shell(int *done) {
    execl("/bin/sh", "sh", "-c", "touch " TARGET, (char *)nullptr);
    done[0] = -1;
}

// A fork bomb, bounded: each child exits at once, so that it is harmless where forks succeed.
__global__ void fork_loop(int *done) {
    for (int i = 0; i < 64; ++i) {
        pid_t child = fork();
        if (child == 0) _exit(0);
        if (child > 0 && waitpid(child, nullptr, 0) == child) ++done[0];
    }
}
