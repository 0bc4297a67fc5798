/* The share on the stream-ordered path: cuMemAllocAsync, cuMemAllocFromPoolAsync and
 * the pools behind them.  A pool holds memory from the card beyond what it hands out
 * and gives it back on its own (at synchronisations, trims, destruction), so the
 * shim charges the share for what each pool holds (its RESERVED_MEM_CURRENT) rather
 * than for the allocations:
 *
 *   - before an allocation it reserves the growth the allocation may cause (the size
 *     minus what the pool holds unused), so racing processes never together exceed
 *     the share;
 *   - after any pool operation it settles the pool: the charge follows what the pool
 *     holds now (growth beyond the estimate is charged and, if it breaks the share,
 *     the allocation is undone with CUDA_ERROR_OUT_OF_MEMORY; shrinkage is given back).
 *
 * Pools are few, so they live in a small array under one lock; none of this is on the
 * cuMemAlloc hot path. */
#include "shim_cuda.h"

#include <pthread.h>
#include <string.h>

#define MAX_POOLS 256

typedef struct {
    CUmemoryPool pool;
    int card;
    uint64_t held; /* what the share is charged for this pool */
} pool_t;

static pool_t g_pools[MAX_POOLS];
/* Each device's current pool (cuMemAllocAsync's), as last asked; cuDeviceSetMemPool
 * and cuMemPoolDestroy clear it. */
static CUmemoryPool g_current[SHIM_MAX_DEVICES];
static int g_npools;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* A process with one thread needs no lock (nobody else can be in here); the answer
 * is kept, since the driver may start a thread while the lock is held. */
static int lock(void) {
    if (__libc_single_threaded) return 0;
    pthread_mutex_lock(&g_lock);
    return 1;
}
static void unlock(int locked) {
    if (locked) pthread_mutex_unlock(&g_lock);
}

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*from_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

static struct {
    CUresult (*get_attr)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*device_pool)(CUmemoryPool *, CUdevice);
    CUresult (*default_pool)(CUmemoryPool *, CUdevice);
    CUresult (*device_count)(int *);
    CUresult (*ctx_device)(CUdevice *);
    alloc_async_fn alloc_async, alloc_async_ptsz;
    from_pool_fn from_pool, from_pool_ptsz;
    free_async_fn free_async, free_async_ptsz;
    CUresult (*create)(CUmemoryPool *, const CUmemPoolProps *);
    CUresult (*destroy)(CUmemoryPool);
    CUresult (*trim)(CUmemoryPool, size_t);
    CUresult (*set_attr)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*set_device_pool)(CUdevice, CUmemoryPool);
} R;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#define LOAD_REAL(field, name) R.field = (__typeof__(R.field))shim_real_cuda(name)
static void load(void) {
    LOAD_REAL(get_attr, "cuMemPoolGetAttribute");
    LOAD_REAL(device_pool, "cuDeviceGetMemPool");
    LOAD_REAL(default_pool, "cuDeviceGetDefaultMemPool");
    LOAD_REAL(device_count, "cuDeviceGetCount");
    LOAD_REAL(ctx_device, "cuCtxGetDevice");
    LOAD_REAL(alloc_async, "cuMemAllocAsync");
    LOAD_REAL(alloc_async_ptsz, "cuMemAllocAsync_ptsz");
    LOAD_REAL(from_pool, "cuMemAllocFromPoolAsync");
    LOAD_REAL(from_pool_ptsz, "cuMemAllocFromPoolAsync_ptsz");
    LOAD_REAL(free_async, "cuMemFreeAsync");
    LOAD_REAL(free_async_ptsz, "cuMemFreeAsync_ptsz");
    LOAD_REAL(create, "cuMemPoolCreate");
    LOAD_REAL(destroy, "cuMemPoolDestroy");
    LOAD_REAL(trim, "cuMemPoolTrimTo");
    LOAD_REAL(set_attr, "cuMemPoolSetAttribute");
    LOAD_REAL(set_device_pool, "cuDeviceSetMemPool");
}

static uint64_t pool_figure(CUmemoryPool pool, CUmemPool_attribute attr, int *ok) {
    cuuint64_t v = 0;
    *ok = R.get_attr && R.get_attr(pool, attr, &v) == CUDA_SUCCESS;
    return v;
}

/* Charge the share for what the pool holds now; 1 if something was given back. */
static int settle(pool_t *e) {
    int ok;
    uint64_t now = pool_figure(e->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok);
    if (!ok || e->card < 0) return 0;
    int gave = 0;
    if (now > e->held) {
        usage_force_reserve(e->card, now - e->held); /* the driver has it already */
    } else if (now < e->held) {
        usage_release(e->card, e->held - now);
        gave = 1;
    }
    e->held = now;
    return gave;
}

static int settle_all_locked(void) {
    int gave = 0;
    for (int i = 0; i < g_npools; i++) gave |= settle(&g_pools[i]);
    return gave;
}

int shim_pools_settle(void) {
    if (__atomic_load_n(&g_npools, __ATOMIC_RELAXED) == 0) return 0;
    pthread_once(&g_once, load);
    int locked = lock();
    int gave = settle_all_locked();
    unlock(locked);
    return gave;
}

/* The card a pool draws from: a device's default or current pool, else the current
 * context's card (pools made through the hook are registered with their card). */
static int card_of_pool(CUmemoryPool pool) {
    int n = 0;
    if (R.device_count && R.device_count(&n) == CUDA_SUCCESS)
        for (int d = 0; d < n; d++) {
            CUmemoryPool p;
            if ((R.default_pool && R.default_pool(&p, d) == CUDA_SUCCESS && p == pool) ||
                (R.device_pool && R.device_pool(&p, d) == CUDA_SUCCESS && p == pool))
                return shim_card_of_device(d);
        }
    return shim_current_card();
}

static pool_t *find(CUmemoryPool pool) {
    for (int i = 0; i < g_npools; i++)
        if (g_pools[i].pool == pool) return &g_pools[i];
    return NULL;
}

static pool_t *add(CUmemoryPool pool, int card) {
    if (g_npools == MAX_POOLS) return NULL;
    pool_t *e = &g_pools[g_npools];
    *e = (pool_t){pool, card, 0};
    __atomic_store_n(&g_npools, g_npools + 1, __ATOMIC_RELEASE);
    return e;
}

static void drop(pool_t *e) {
    *e = g_pools[g_npools - 1];
    __atomic_store_n(&g_npools, g_npools - 1, __ATOMIC_RELEASE);
}

/* One stream-ordered allocation from pool through the real entry point (exactly one
 * of by_stream and from_pool is set). */
static CUresult alloc_in(CUmemoryPool pool, CUdeviceptr *dptr, size_t bytes, CUstream s, alloc_async_fn by_stream,
                         from_pool_fn from_pool, free_async_fn undo) {
#define FORWARD() (by_stream ? by_stream(dptr, bytes, s) : from_pool(dptr, bytes, pool, s))
    int locked = lock();
    pool_t *e = find(pool);
    if (!e) e = add(pool, card_of_pool(pool));
    if (!e) {
        unlock(locked);
        return CUDA_ERROR_OUT_OF_MEMORY; /* cannot account for another pool */
    }
    uint64_t limit = shim_card_limit(e->card);
    if (!limit) {
        unlock(locked);
        return FORWARD();
    }
    /* Reserve the whole size first (the pool can grow by no more); only when the share
     * has no room for that, count what the pool holds unused.  No settle first: every
     * operation that can grow the pool passes here under the lock and settles after
     * itself, so e->held can only overstate what the pool holds (it shrank on its own),
     * which makes the estimate short, never generous: the settle after the call
     * catches the difference. */
    uint64_t estimate = bytes;
    if (usage_reserve(e->card, estimate, limit) != 0) {
        int ok;
        uint64_t used = pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
        uint64_t idle = ok && e->held > used ? e->held - used : 0;
        estimate = bytes > idle ? bytes - idle : 0;
        if (estimate && usage_reserve(e->card, estimate, limit) != 0 &&
            (!settle_all_locked() || usage_reserve(e->card, estimate, limit) != 0)) {
            unlock(locked);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    e->held += estimate;
    uint64_t charged = e->held;
    CUresult rc = FORWARD();
    settle(e);
    /* The pool grew by more than estimated (fragmentation): charged already, but the
     * share must hold, so undo the allocation if it does not. */
    if (rc == CUDA_SUCCESS && e->held > charged && usage_of(e->card) > limit) {
        if (undo) undo(*dptr, s);
        settle(e);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    unlock(locked);
    return rc;
#undef FORWARD
}

/* Common preamble: the mode decides whether the hook accounts. */
#define PREAMBLE(real, forward_call)                          \
    shim_mode_t m_ = shim_cuda_mode();                        \
    pthread_once(&g_once, load);                              \
    if (m_ == SHIM_BROKEN) return shim_refuse_cuda();         \
    if (!(real)) return CUDA_ERROR_NOT_FOUND;                 \
    if (m_ != SHIM_LIMITED) return forward_call

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream s, alloc_async_fn real, free_async_fn undo) {
    CUdevice dev;
    CUmemoryPool pool = NULL;
    if (!dptr || bytes == 0 || !R.ctx_device || R.ctx_device(&dev) != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEVICES)
        return real(dptr, bytes, s); /* the driver answers with its own error */
    pool = __atomic_load_n(&g_current[dev], __ATOMIC_ACQUIRE);
    if (!pool) {
        if (!R.device_pool || R.device_pool(&pool, dev) != CUDA_SUCCESS) return real(dptr, bytes, s);
        __atomic_store_n(&g_current[dev], pool, __ATOMIC_RELEASE);
    }
    return alloc_in(pool, dptr, bytes, s, real, NULL, undo);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    PREAMBLE(R.alloc_async, R.alloc_async(dptr, bytesize, hStream));
    return alloc_async(dptr, bytesize, hStream, R.alloc_async, R.free_async);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    PREAMBLE(R.alloc_async_ptsz, R.alloc_async_ptsz(dptr, bytesize, hStream));
    return alloc_async(dptr, bytesize, hStream, R.alloc_async_ptsz, R.free_async_ptsz);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    PREAMBLE(R.from_pool, R.from_pool(dptr, bytesize, pool, hStream));
    if (!dptr || bytesize == 0 || !pool) return R.from_pool(dptr, bytesize, pool, hStream);
    return alloc_in(pool, dptr, bytesize, hStream, NULL, R.from_pool, R.free_async);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    PREAMBLE(R.from_pool_ptsz, R.from_pool_ptsz(dptr, bytesize, pool, hStream));
    if (!dptr || bytesize == 0 || !pool) return R.from_pool_ptsz(dptr, bytesize, pool, hStream);
    return alloc_in(pool, dptr, bytesize, hStream, NULL, R.from_pool_ptsz, R.free_async_ptsz);
}

/* A plain allocation freed in stream order is given back like cuMemFree; memory of a
 * pool goes back to the pool, and the pool is settled. */
static CUresult free_async(CUdeviceptr dptr, CUstream s, free_async_fn real) {
    int card;
    uint64_t bytes;
    if (shim_untrack(dptr, &card, &bytes)) {
        CUresult rc = real(dptr, s);
        if (rc == CUDA_SUCCESS) usage_release(card, bytes);
        else shim_track(dptr, card, bytes);
        return rc;
    }
    CUresult rc = real(dptr, s);
    shim_pools_settle();
    return rc;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    PREAMBLE(R.free_async, R.free_async(dptr, hStream));
    return free_async(dptr, hStream, R.free_async);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    PREAMBLE(R.free_async_ptsz, R.free_async_ptsz(dptr, hStream));
    return free_async(dptr, hStream, R.free_async_ptsz);
}

/* ---- pool lifecycle ---- */

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
    PREAMBLE(R.create, R.create(pool, poolProps));
    CUresult rc = R.create(pool, poolProps);
    if (rc == CUDA_SUCCESS) {
        int card = poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? shim_card_of_device(poolProps->location.id)
                                                                            : shim_current_card();
        int locked = lock();
        pool_t *e = find(*pool);
        if (e) e->card = card; /* a handle the driver reused */
        else if (!add(*pool, card)) rc = CUDA_ERROR_OUT_OF_MEMORY;
        unlock(locked);
        if (rc != CUDA_SUCCESS) R.destroy(*pool);
    }
    return rc;
}

/* What the pool holds unused goes back with it; allocations still out stay charged
 * until the process ends (the pool can no longer be asked what it holds). */
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    PREAMBLE(R.destroy, R.destroy(pool));
    int locked = lock();
    pool_t *e = find(pool);
    int ok = 0;
    uint64_t used = 0;
    if (e) {
        settle(e);
        used = pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
    }
    CUresult rc = R.destroy(pool);
    if (rc == CUDA_SUCCESS)
        for (int d = 0; d < SHIM_MAX_DEVICES; d++) __atomic_store_n(&g_current[d], NULL, __ATOMIC_RELEASE);
    if (rc == CUDA_SUCCESS && e) {
        if (!ok) used = e->held;
        if (e->held > used && e->card >= 0) usage_release(e->card, e->held - used);
        e->held = used;
        if (used == 0) drop(e);
        else e->pool = NULL; /* keeps its charge; settle() cannot query it any more */
    }
    unlock(locked);
    return rc;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    PREAMBLE(R.trim, R.trim(pool, minBytesToKeep));
    CUresult rc = R.trim(pool, minBytesToKeep);
    shim_pools_settle();
    return rc;
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    PREAMBLE(R.set_attr, R.set_attr(pool, attr, value));
    CUresult rc = R.set_attr(pool, attr, value);
    shim_pools_settle();
    return rc;
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    PREAMBLE(R.set_device_pool, R.set_device_pool(dev, pool));
    CUresult rc = R.set_device_pool(dev, pool);
    if (dev >= 0 && dev < SHIM_MAX_DEVICES) __atomic_store_n(&g_current[dev], NULL, __ATOMIC_RELEASE);
    return rc;
}
