/* cuGetProcAddress of the mock driver, over the table generated from cuda.h and
 * cudaTypedefs.h (gen-cuda-stubs.py): a base name resolves to the newest variant
 * whose CUDA version is at most the one asked for, the per-thread default-stream
 * variant (_ptds/_ptsz) when the flags ask for it and one exists.  A name that is not
 * a base name in the table but is exported (a versioned name such as cuMemAlloc_v2)
 * resolves to itself. */
#include "cuda_internal.h"

#include <string.h>

#include "cuda_procs.h"

static int by_base(const char *symbol, size_t *first) {
    size_t lo = 0, hi = CUDA_PROCS_LEN;
    while (lo < hi) { /* first entry with base >= symbol */
        size_t mid = (lo + hi) / 2;
        if (strcmp(CUDA_PROCS[mid].base, symbol) < 0) lo = mid + 1;
        else hi = mid;
    }
    *first = lo;
    return lo < CUDA_PROCS_LEN && strcmp(CUDA_PROCS[lo].base, symbol) == 0;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    size_t i;
    if (by_base(symbol, &i)) {
        const cuda_proc_t *best = NULL, *best_ptds = NULL;
        for (; i < CUDA_PROCS_LEN && strcmp(CUDA_PROCS[i].base, symbol) == 0; i++) {
            const cuda_proc_t *e = &CUDA_PROCS[i];
            if (e->version > cudaVersion) continue;
            if (e->ptds) best_ptds = e; /* ascending versions: the last that fits wins */
            else best = e;
        }
        if (want_ptds && best_ptds) best = best_ptds;
        if (best) {
            *pfn = best->fn;
            if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
        if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    for (size_t k = 0; k < CUDA_EXPORTS_LEN; k++)
        if (strcmp(CUDA_EXPORTS[k].name, symbol) == 0) {
            *pfn = CUDA_EXPORTS[k].fn;
            if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
