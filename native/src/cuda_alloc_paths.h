/* The device-allocation paths of the CUDA driver API, as programs use them, for the
 * tools that exercise them (gpushare-probe --api, the alloc-loop benchmark): each
 * allocates and frees one block of a given size on one device through entry points
 * it resolves itself from the loaded libcuda.so.1 (dlsym, as frameworks do).  Not part
 * of the mock driver. */
#ifndef GPUSHARE_CUDA_ALLOC_PATHS_H
#define GPUSHARE_CUDA_ALLOC_PATHS_H

#include <cuda.h>
#include <stddef.h>

#define ALLOC_PATH_NAMES "alloc, pitch, managed, async, pool, vmm"

typedef struct {
    CUdevice dev;
    CUmemoryPool pool;  /* pool: the pool it made */
    size_t granularity; /* vmm */
    void *fn[12];       /* the entry points of the path, in the path's own order */
} path_state_t;

typedef struct {
    CUdeviceptr ptr;
    size_t size;                       /* vmm: the rounded-up size mapped */
    CUmemGenericAllocationHandle phys; /* vmm */
} path_block_t;

/* Every function returns CUDA_SUCCESS or the error of the call named in *step. */
typedef struct {
    const char *name;  /* as given to --api */
    const char *entry; /* the allocating entry point, for messages */
    CUresult (*open)(path_state_t *st, void *lib, CUdevice dev, const char **step);
    CUresult (*alloc)(path_state_t *st, path_block_t *b, size_t bytes, const char **step);
    CUresult (*release)(path_state_t *st, path_block_t *b, const char **step);
    void (*close)(path_state_t *st);
} alloc_path_t;

/* The path called name, or NULL. */
const alloc_path_t *alloc_path_named(const char *name);

#endif
