/* What the shim's CUDA hooks share across files: shim.c owns the loading of the real
 * driver, the device numbering and the plain allocations' pointer table; shim_ctx.c
 * (contexts), shim_vmm.c (virtual memory) and shim_array.c (CUDA arrays) hold the share
 * on the other allocation paths with these helpers.  The hooks' layer: it sits on the
 * accounting (shim_usage.h) and the pools (shim_pool.h), which never include it;
 * shim_pool.c reaches these helpers only through shim_pool_host (shim_pool.h). */
#ifndef GPUSHARE_SHIM_CUDA_H
#define GPUSHARE_SHIM_CUDA_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include "shim_config.h"
#include "shim_pool.h"
#include "shim_usage.h"

/* Hooked entry points defined outside shim.c (added to shim.c's hook table, so
 * dlsym and cuGetProcAddress hand them out too); the pools' are in shim_pool.h. */
#define SHIM_ARRAY_HOOKS(X)          \
    X(cuArrayCreate_v2)              \
    X(cuArray3DCreate_v2)            \
    X(cuArrayDestroy)
#define SHIM_VMM_HOOKS(X)            \
    X(cuMemCreate)                   \
    X(cuMemRelease)                  \
    X(cuMemRetainAllocationHandle)   \
    X(cuMemMap)                      \
    X(cuMemUnmap)

/* Every CUDA context a process holds on a card is charged to the share (shim_ctx.c). */
#define SHIM_CTX_HOOKS(X)            \
    X(cuCtxCreate)                   \
    X(cuCtxCreate_v2)                \
    X(cuCtxDestroy)                  \
    X(cuCtxDestroy_v2)               \
    X(cuDevicePrimaryCtxRetain)      \
    X(cuDevicePrimaryCtxRelease)     \
    X(cuDevicePrimaryCtxRelease_v2)

/* The mode, with the real driver loaded. */
HIDDEN shim_mode_t shim_cuda_mode(void);
/* A real driver entry point by name (NULL when the driver lacks it). */
HIDDEN void *shim_real_cuda(const char *name);
HIDDEN CUresult shim_refuse_cuda(void);
/* Container card of a CUDA device ordinal / of the current context; -1 if unknown. */
HIDDEN int shim_card_of_device(int dev);
HIDDEN int shim_current_card(void);
HIDDEN uint64_t shim_card_limit(int card); /* 0 = no limit */
/* Take a plain allocation (cuMemAlloc & co.) out of the pointer table: 1 and its
 * card and size when it was tracked; shim_track puts one back. */
HIDDEN int shim_untrack(CUdeviceptr p, int *card, uint64_t *bytes);
HIDDEN void shim_track(CUdeviceptr p, int card, uint64_t bytes);
/* Its entries are counted in g_table_count (shim_pool.h). */
/* 1 when the process has one thread and no plain allocation out: shim_untrack would
 * find nothing (a free on another path need not ask). */
static inline int shim_tracks_nothing(void) { return LIKELY(__libc_single_threaded) && g_table_count == 0; }

#endif
