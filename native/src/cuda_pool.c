/* Stream-ordered allocation and memory pools of the mock driver.
 *
 * A pool holds memory from its card (reserved) and hands it out (used); what it
 * holds beyond what is in use is kept for reuse.  Only growth takes memory from the
 * card, so the card is charged for what pools hold, not for what they hand out.  Work
 * completes when issued, so the release a real driver makes at the next
 * synchronisation (down to the release threshold) happens when memory is freed.  A
 * destroyed pool gives back what it does not use at once and the rest as it is freed. */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define POOL_MAGIC 0x706f6f6cu

struct CUmemPoolHandle_st {
    unsigned magic;
    int device;
    int is_default;
    int destroyed;
    uint64_t reserved, used, reserved_high, used_high, threshold;
    int reuse[3]; /* follow event dependencies, allow opportunistic, allow internal dependencies */
    struct CUmemPoolHandle_st *next;
};

static struct CUmemPoolHandle_st g_default[INV_MAX_GPUS];
static struct CUmemPoolHandle_st *g_current[INV_MAX_GPUS];
static struct CUmemPoolHandle_st *g_created; /* never freed: stale handles read as destroyed */

static struct CUmemPoolHandle_st *default_pool(int dev) {
    struct CUmemPoolHandle_st *p = &g_default[dev];
    if (p->magic != POOL_MAGIC)
        *p = (struct CUmemPoolHandle_st){POOL_MAGIC, dev, 1, 0, 0, 0, 0, 0, 0, {1, 1, 1}, NULL};
    return p;
}

static int pool_live(CUmemoryPool p) {
    if (!p) return 0;
    if (p >= &g_default[0] && p < &g_default[INV_MAX_GPUS]) return p->magic == POOL_MAGIC;
    for (struct CUmemPoolHandle_st *q = g_created; q; q = q->next)
        if (q == p) return !q->destroyed;
    return 0;
}

/* Give the card what the pool holds beyond max(used, keep); lock held. */
static void release_to(CUmemoryPool p, uint64_t keep) {
    uint64_t floor = p->used > keep ? p->used : keep;
    if (p->reserved > floor) {
        cuda_card_give(p->device, p->reserved - floor);
        p->reserved = floor;
    }
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t bytes, CUmemoryPool p) {
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_SUCCESS;
    if (!pool_live(p)) {
        pthread_mutex_unlock(&cuda_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t idle = p->reserved - p->used, grow = bytes > idle ? bytes - idle : 0;
    void *mem = NULL;
    if (grow && cuda_card_take(p->device, grow) != 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!(mem = cuda_backing_map(bytes, 0))) {
        if (grow) cuda_card_give(p->device, grow);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        cuda_range_t r = {(uintptr_t)mem, bytes, p->device, RANGE_POOL, p};
        if (cuda_range_add(&r) != 0) {
            cuda_backing_unmap(mem, bytes);
            if (grow) cuda_card_give(p->device, grow);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            p->reserved += grow;
            p->used += bytes;
            if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
            if (p->used > p->used_high) p->used_high = p->used;
            *dptr = (CUdeviceptr)(uintptr_t)mem;
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

CUresult cuda_pool_free(cuda_range_t *r) {
    CUmemoryPool p = r->owner;
    p->used -= r->size;
    cuda_backing_unmap((void *)r->base, r->size);
    cuda_range_remove(r);
    release_to(p, p->destroyed ? 0 : p->threshold);
    return CUDA_SUCCESS;
}

/* The pool cuMemAllocAsync uses: the current pool of the stream's device. */
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    CHECK_INIT();
    int dev;
    if (!cuda_stream_device(hStream, &dev)) return CUDA_ERROR_INVALID_HANDLE;
    if (dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUmemoryPool p = g_current[dev] ? g_current[dev] : default_pool(dev);
    pthread_mutex_unlock(&cuda_lock);
    return pool_alloc(dptr, bytesize, p);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return cuMemAllocAsync(dptr, bytesize, hStream);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    CHECK_INIT();
    int dev;
    if (!cuda_stream_device(hStream, &dev)) return CUDA_ERROR_INVALID_HANDLE;
    if (!dptr || bytesize == 0 || !pool) return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(dptr, bytesize, pool);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    CHECK_INIT();
    int dev;
    if (!cuda_stream_device(hStream, &dev)) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)dptr, 0);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (dptr && r && r->base == (uintptr_t)dptr) {
        if (r->kind == RANGE_POOL) {
            rc = cuda_pool_free(r);
        } else if (r->kind == RANGE_DEVICE || r->kind == RANGE_MANAGED) {
            /* the driver accepts any device allocation here */
            cuda_card_give(r->device, r->size);
            cuda_backing_unmap((void *)r->base, r->size);
            cuda_range_remove(r);
            rc = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return cuMemFreeAsync(dptr, hStream); }

/* ---- pools ---- */

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
    CHECK_INIT();
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !cuda_device_valid(poolProps->location.id))
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->handleTypes & ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))
        return CUDA_ERROR_NOT_SUPPORTED;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (struct CUmemPoolHandle_st){POOL_MAGIC, poolProps->location.id, 0, 0, 0, 0, 0, 0, 0, {1, 1, 1}, NULL};
    pthread_mutex_lock(&cuda_lock);
    p->next = g_created;
    g_created = p;
    pthread_mutex_unlock(&cuda_lock);
    *pool = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_SUCCESS;
    if (!pool_live(pool) || pool->is_default) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        pool->destroyed = 1;
        release_to(pool, 0);
        for (int d = 0; d < INV_MAX_GPUS; d++)
            if (g_current[d] == pool) g_current[d] = NULL;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    int ok = pool_live(pool);
    if (ok) release_to(pool, minBytesToKeep);
    pthread_mutex_unlock(&cuda_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    CHECK_INIT();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = pool_live(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            pool->threshold = *(cuuint64_t *)value;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: /* may only be reset */
            if (*(cuuint64_t *)value != 0) rc = CUDA_ERROR_INVALID_VALUE;
            else pool->reserved_high = pool->reserved;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0) rc = CUDA_ERROR_INVALID_VALUE;
            else pool->used_high = pool->used;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE; /* the current figures are read-only */
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    CHECK_INIT();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = pool_live(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = pool->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = pool->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = pool->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = pool->used_high; break;
        default: rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
    CHECK_INIT();
    if (!cuda_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    *pool_out = default_pool(dev);
    pthread_mutex_unlock(&cuda_lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    CHECK_INIT();
    if (!cuda_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    *pool = g_current[dev] ? g_current[dev] : default_pool(dev);
    pthread_mutex_unlock(&cuda_lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    CHECK_INIT();
    if (!cuda_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_SUCCESS;
    if (!pool_live(pool) || pool->device != dev) rc = CUDA_ERROR_INVALID_VALUE;
    else g_current[dev] = pool->is_default ? NULL : pool;
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}
