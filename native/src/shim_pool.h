/* The share on the stream-ordered path (shim_pool.c): what each memory pool holds is
 * charged to the share, through the accounting (shim_usage.h).  Depends on that and on
 * the driver's types (cuda.h) only; it includes no hooks' header.  What the pools need
 * of the hooks (the real driver, the card numbering, the plain allocations' table) is
 * handed to them as a shim_pool_host_t, which the hooks define (shim.c). */
#ifndef GPUSHARE_SHIM_POOL_H
#define GPUSHARE_SHIM_POOL_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include "shim_usage.h"

/* The pools' entry points (added to shim.c's hook table, so dlsym and cuGetProcAddress
 * hand them out too). */
#define SHIM_POOL_HOOKS(X)           \
    X(cuMemAllocAsync)               \
    X(cuMemAllocAsync_ptsz)          \
    X(cuMemAllocFromPoolAsync)       \
    X(cuMemAllocFromPoolAsync_ptsz)  \
    X(cuMemFreeAsync)                \
    X(cuMemFreeAsync_ptsz)           \
    X(cuMemPoolCreate)               \
    X(cuMemPoolDestroy)              \
    X(cuMemPoolTrimTo)               \
    X(cuMemPoolSetAttribute)         \
    X(cuDeviceSetMemPool)

/* What the pools need of the hooks, set by them (shim.c's shim_pool_host, a constant
 * initialised at load time, so it is there before any entry point is called). */
typedef struct {
    shim_mode_t (*cuda_mode)(void);         /* the mode, with the real driver loaded */
    void *(*real_cuda)(const char *name);   /* a real driver entry point, or NULL */
    CUresult (*refuse_cuda)(void);          /* the answer of a refused configuration */
    int (*card_of_device)(int dev);         /* container card of a CUDA ordinal; -1 */
    int (*current_card)(void);              /* container card of the current context; -1 */
    uint64_t (*card_limit)(int card);       /* 0 = no limit */
    /* The plain allocations' pointer table (cuMemAlloc & co.): take one out (1 and its
     * card and size when it was tracked), put one back. */
    int (*untrack)(CUdeviceptr p, int *card, uint64_t *bytes);
    void (*track)(CUdeviceptr p, int card, uint64_t bytes);
} shim_pool_host_t;

HIDDEN extern const shim_pool_host_t shim_pool_host;

/* Entries in the hooks' table of plain allocations (kept by shim.c, defined in
 * shim_pool.c): a free on the stream-ordered path reads it to tell that none is out.
 * Read without the table's lock only while the process has one thread. */
HIDDEN extern size_t g_table_count;

/* Bring the share in line with what the process's pools hold now (frees are not
 * followed by a query, and a driver shrinks pools at synchronisations the shim does
 * not see); 1 if anything was given back. */
HIDDEN int shim_pools_settle(void);
HIDDEN void shim_pools_forget(void); /* after fork, in the child */
static inline CUresult shim_pools_settle_after(CUresult rc) {
    shim_pools_settle();
    return rc;
}

#endif
