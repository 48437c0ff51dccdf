/* pmpp_abi.h: the C interface between compiled kernel modules (through the prelude
 * pmpp_cuda.h), the CPU engine's runtime library (runtime/pmpp_runtime.cpp) and the Python
 * worker (worker.py mirrors the structs below with ctypes; keep them in step).
 */
#ifndef PMPP_ABI_H
#define PMPP_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- what kernel code reads: the current CUDA thread ---------------------------------- */
typedef struct pmpp_dim {
    unsigned int x, y, z;
} pmpp_dim;

typedef struct pmpp_thread_ctx {
    pmpp_dim thread_idx, block_idx, block_dim, grid_dim;
    /* Polling (see pmpp_note_poll in pmpp_cuda.h): the address of the thread's last atomic that
     * left memory as it was (or volatile load), and how many such accesses of it came in a row. */
    const void *poll_addr;
    uint32_t poll_count;
} pmpp_thread_ctx;

/* A thread whose atomics (or volatile loads) read the same address this many times in a row
 * without changing it is taken to be waiting for another thread: it lets its block's other
 * threads run. */
#define PMPP_POLLS_BEFORE_YIELD 32

/* The fiber running on this OS thread. Initial-exec TLS: one load through %fs, no call. */
extern __thread pmpp_thread_ctx *pmpp_cur __attribute__((tls_model("initial-exec")));

/* ---- barriers and warp-level operations ------------------------------------------------ */
enum { PMPP_BAR_PLAIN = 0, PMPP_BAR_COUNT = 1, PMPP_BAR_AND = 2, PMPP_BAR_OR = 3 };
void pmpp_syncthreads(const char *file, int line);
int pmpp_syncthreads_op(int op, int predicate, const char *file, int line);

enum {
    PMPP_W_SYNC = 0,
    PMPP_W_SHFL_IDX,
    PMPP_W_SHFL_UP,
    PMPP_W_SHFL_DOWN,
    PMPP_W_SHFL_XOR,
    PMPP_W_BALLOT,
    PMPP_W_ANY,
    PMPP_W_ALL,
    PMPP_W_MATCH_ANY,
    PMPP_W_MATCH_ALL,
    PMPP_W_REDUCE_ADD,
    PMPP_W_REDUCE_MIN_U,
    PMPP_W_REDUCE_MAX_U,
    PMPP_W_REDUCE_MIN_I,
    PMPP_W_REDUCE_MAX_I,
    PMPP_W_REDUCE_AND,
    PMPP_W_REDUCE_OR,
    PMPP_W_REDUCE_XOR,
    PMPP_W_NUM_OPS
};
/* Rendezvous of the lanes named in mask; returns this lane's result (value bits). */
uint64_t pmpp_warp_op(int op, uint32_t mask, uint64_t value, int arg, int width, const char *file,
                      int line);
uint32_t pmpp_activemask(void);
/* Let the block's other threads run (a thread spinning on a condition they will make true). */
void pmpp_yield(void);

/* ---- shared memory ------------------------------------------------------------------- */
/* site: address of a per-declaration (per template instantiation) static; the first thread
 * of a block to reach the declaration allocates, the others get the same address. */
void *pmpp_shared_var(const void *site, size_t size, size_t align, const char *name,
                      size_t elem_size, const char *elem_type, int rank, const uint32_t *extents);
void *pmpp_dynamic_shared(const char *name, size_t elem_size, const char *elem_type);

/* ---- errors raised from kernel code ---------------------------------------------------- */
void pmpp_device_assert(const char *expr, const char *file, int line, const char *func)
    __attribute__((noreturn));
void pmpp_trap(const char *what, const char *file, int line) __attribute__((noreturn));
/* Checked builds: bounds check of an atomic's address (atomics never race with each other). */
void pmpp_check_atomic(const void *addr, size_t size, const void *pc);

/* ---- module table (generated at the end of each module) ------------------------------- */
typedef void (*pmpp_thunk)(void **args);
typedef struct pmpp_kernel_entry {
    const char *name;
    pmpp_thunk thunk;
    int32_t nparams;
    const uint32_t *param_sizes;
} pmpp_kernel_entry;

/* ---- launching (called by the worker through ctypes) ---------------------------------- */
enum { PMPP_REGION_WRITABLE = 0, PMPP_REGION_READ_ONLY = 1, PMPP_REGION_CONSTANT = 2 };
typedef struct pmpp_region_desc {
    void *base;
    uint64_t size;
    uint32_t elem_size;
    uint32_t is_const;     /* PMPP_REGION_*: an argument array, or a __constant__ variable */
    const char *name;      /* parameter name */
    const char *type_name; /* numpy dtype name */
    int64_t view_offset;   /* an argument array: bytes from base (its allocation) to its pointer */
} pmpp_region_desc;

enum {
    PMPP_OK = 0,
    PMPP_ERR_OUT_OF_BOUNDS = 1,
    PMPP_ERR_RACE = 2,
    PMPP_ERR_DIVERGENCE = 3,
    PMPP_ERR_ASSERT = 4,
    PMPP_ERR_LIMIT = 5,
    PMPP_ERR_DEADLOCK = 6
};

#define PMPP_ERROR_MSG_LEN 4096
typedef struct pmpp_launch_desc {
    pmpp_thunk thunk;
    void **args;
    uint32_t grid[3];
    uint32_t block[3];
    uint64_t shared_mem;
    int32_t check;
    int32_t nthreads; /* OS threads to spread the blocks over */
    const char *kernel_name;
    int32_t nregions;
    const pmpp_region_desc *regions;
    int32_t count;         /* count builds: collect counters (pmpp_count_result) */
    uint32_t sample_warp;  /* ... and keep every access of this warp of block sample_block */
    uint64_t sample_block;
    /* The limits of the GPU chosen to check launches against (PMPP_TARGET): 0 and NULL for the
     * engine's own, the H100's. target names the GPU in messages, e.g. "sm_75 (T4)". */
    uint64_t max_shared_per_block; /* static + dynamic bytes, the opt-in maximum */
    uint32_t max_threads_per_block;
    const char *target;
    /* out */
    int32_t error_kind;
    char error_msg[PMPP_ERROR_MSG_LEN];
} pmpp_launch_desc;

int pmpp_launch(pmpp_launch_desc *desc);

/* ---- counters (count builds, see "Counters" in pmpp_runtime.cpp) ---------------------- */
enum { PMPP_SPACE_GLOBAL = 0, PMPP_SPACE_SHARED = 1, PMPP_SPACE_CONSTANT = 2, PMPP_SPACE_CODE = 3 };
enum { PMPP_OP_LD = 0, PMPP_OP_ST = 1, PMPP_OP_ATOM = 2, PMPP_OP_BLOCK = 3 };

/* Totals of one code address: a memory access of kernel code, or the start of a basic block. */
typedef struct pmpp_count_row {
    uint64_t pc;               /* code address, as an offset into the module */
    int32_t space, op;
    uint32_t width;            /* bytes per lane (the largest seen) */
    uint32_t pad;
    uint64_t executed;         /* warp-level executions (requests) */
    uint64_t threads;          /* active lanes, summed over executions */
    uint64_t partial;          /* executions with some lanes of the warp not taking part */
    uint64_t diverged_warps;   /* warps with at least one such execution here */
    uint64_t sectors;          /* global: distinct 32-byte sectors, summed */
    uint64_t wavefronts;       /* shared: wavefronts (bank-conflict model), summed */
    uint64_t ideal_wavefronts; /* shared: wavefronts without bank conflicts, summed */
    uint64_t addresses;        /* distinct addresses per execution, summed */
    uint64_t max_same_address; /* most active lanes of one execution on one address */
} pmpp_count_row;

/* Every execution (up to PMPP_SAMPLES_PER_PC per code address) of the sampled warp. */
#define PMPP_SAMPLES_PER_PC 64
typedef struct pmpp_count_sample {
    uint64_t pc;
    int32_t space, op;
    uint32_t k;                /* the warp's k-th execution of this access */
    uint32_t mask;             /* lanes taking part */
    uint32_t width;
    int32_t region;            /* global: index of the argument array; -1 otherwise */
    int64_t offset[32];        /* bytes from the array (global) or from the start of shared memory */
    int64_t array_offset;      /* shared: where the __shared__ array of lane's access starts */
    char array[48];            /* shared: that array's name */
} pmpp_count_sample;

typedef struct pmpp_count_summary {
    uint64_t nrows, nsamples;
    uint64_t blocks, warps;
    uint64_t barriers;                /* warp-level __syncthreads() executions */
    uint64_t atom_global_addresses;   /* distinct global addresses updated by atomics */
    uint64_t atom_global_max_updates; /* most atomic updates of one global address */
    uint64_t atom_shared_addresses;   /* distinct shared addresses updated by atomics, per block, summed */
    uint64_t atom_shared_max_updates; /* most atomic updates of one shared address in a block */
} pmpp_count_summary;

/* The last counted launch: fills *summary and up to max_rows rows and max_samples samples. */
void pmpp_count_result(pmpp_count_summary *summary, pmpp_count_row *rows, uint64_t max_rows,
                       pmpp_count_sample *samples, uint64_t max_samples);
/* Address and size (from the ELF symbol table) of a global variable of a loaded module. */
int pmpp_symbol(void *handle, const char *name, void **addr, uint64_t *size);
const char *pmpp_runtime_version(void);

#ifdef __cplusplus
}
#endif
#endif /* PMPP_ABI_H */
