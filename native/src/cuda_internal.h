/* Shared internals of the mock libcuda.so.1: the device view, the current context,
 * per-card accounting of device memory, and the registry of host-backed device
 * ranges.  Each cuda_*.c file implements one area of the driver API on top of it;
 * every function cuda.h declares and no file implements is a generated stub
 * (gen-cuda-stubs.py). */
#ifndef GPUSHARE_CUDA_INTERNAL_H
#define GPUSHARE_CUDA_INTERNAL_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))
#define MIB (1ULL << 20)
/* Memory the driver keeps per process and card while a context exists. */
#define CONTEXT_RESERVE_BYTES (304ULL * MIB)
/* Granularity of virtual-memory allocations (cuMemCreate, cuMemAddressReserve). */
#define VMM_GRANULARITY (2ULL * MIB)

/* ---- initialisation and devices (mock_cuda.c) ---- */
HIDDEN extern inventory_t cuda_view; /* after CUDA_VISIBLE_DEVICES */
HIDDEN int cuda_stub_initialised(void);
HIDDEN int cuda_device_valid(CUdevice dev);

#define CHECK_INIT() \
    if (!cuda_stub_initialised()) return CUDA_ERROR_NOT_INITIALIZED

/* ---- contexts (mock_cuda.c) ---- */
HIDDEN CUcontext cuda_current_context(void);
/* Device of the current context: CUDA_ERROR_INVALID_CONTEXT when there is none. */
HIDDEN CUresult cuda_current_device(CUdevice *dev);
HIDDEN int cuda_context_device(CUcontext ctx); /* -1 when ctx is not a live context */

/* ---- per-card accounting (cuda_cards.c) ----
 * Everything the process holds on a card: device allocations, pools' reserves,
 * physical VMM allocations, plus the context reserve while a context exists.  Also
 * published in the node's process table (gpu_process_table.h). */
HIDDEN extern pthread_mutex_t cuda_lock; /* guards accounting, ranges, pools, VMM */
HIDDEN int cuda_card_take(int dev, uint64_t bytes); /* 0, or -1 when the card is full; lock held */
HIDDEN void cuda_card_give(int dev, uint64_t bytes); /* lock held */
HIDDEN uint64_t cuda_card_taken(int dev);             /* lock held */
HIDDEN int cuda_card_context(int dev, int delta);     /* contexts on dev += delta; -1 if the reserve does not fit */
HIDDEN uint64_t cuda_card_size(int dev);

/* ---- host-backed ranges (cuda_ranges.c) ---- */
typedef enum {
    RANGE_DEVICE = 1,  /* cuMemAlloc, cuMemAllocPitch */
    RANGE_MANAGED,     /* cuMemAllocManaged */
    RANGE_POOL,        /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    RANGE_VMM,         /* a mapped, accessible piece of a VMM reservation */
    RANGE_HOST,        /* cuMemAllocHost, cuMemHostAlloc: not device memory */
    RANGE_HOST_REGISTERED, /* cuMemHostRegister */
} range_kind_t;

typedef struct {
    uintptr_t base;
    size_t size;
    int device; /* -1 for host memory */
    range_kind_t kind;
    void *owner; /* the pool of a RANGE_POOL */
} cuda_range_t;

HIDDEN int cuda_range_add(const cuda_range_t *r); /* lock held; -1 on no memory */
/* The range holding [p, p + len), or NULL; lock held. */
HIDDEN cuda_range_t *cuda_range_find(uintptr_t p, size_t len);
HIDDEN void cuda_range_remove(cuda_range_t *r); /* lock held */

/* Map len bytes of zeroed, lazily committed host memory (legacy32: below 4 GiB, for
 * the 32-bit legacy entry points); NULL when none is left. */
HIDDEN void *cuda_backing_map(size_t len, int legacy32);
HIDDEN void cuda_backing_unmap(void *p, size_t len);

/* ---- streams (cuda_streams.c) ---- */
/* 1 if s is NULL, a special stream handle or a live stream; *dev gets its device
 * (the current context's for the special handles), -1 if there is none. */
HIDDEN int cuda_stream_device(CUstream s, int *dev);

/* ---- pools (cuda_pool.c) ---- */
HIDDEN CUresult cuda_pool_free(cuda_range_t *r); /* frees a pool allocation; lock held */

#endif
