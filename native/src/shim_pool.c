/* The share on the stream-ordered path: cuMemAllocAsync, cuMemAllocFromPoolAsync and
 * the pools behind them.  A pool holds memory from the card beyond what it hands out
 * and gives it back on its own (at synchronisations, trims, destruction), so the
 * shim charges the share for what each pool holds (its RESERVED_MEM_CURRENT) rather
 * than for the allocations.  Per pool it keeps two figures, under one lock:
 *
 *   known  the pool's RESERVED_MEM_CURRENT when the shim last asked.  Only an
 *          allocation makes a pool grow, every allocation passes through the hooks
 *          below and asks after itself, so the pool never holds more than known:
 *          frees, trims and the driver's releases at synchronisations only shrink it
 *          (known then overstates it, which can only over-charge);
 *   held   what the share is charged for the pool, never less than known.
 *
 * An allocation of n bytes:
 *
 *   - before the call, makes held cover known + n (the pool grows by no more,
 *     fragmentation aside), reserving the difference on the share, so racing processes
 *     never together exceed it; only when the share has no room for that does it ask
 *     the driver what the pool holds now and how much of it is unused;
 *   - after the call, asks for the pool's reserve (the one driver query on this path)
 *     and settles the charge on it: growth beyond held (fragmentation, the driver's
 *     granularity) is charged and, if that breaks the share, the allocation is undone
 *     with CUDA_ERROR_OUT_OF_MEMORY.  What held has beyond the reserve is given back,
 *     all of it after a failed call; after a success held keeps up to one allocation
 *     of that size above the reserve, and no more than 1/64 of the share (the slack):
 *     the reservation the next allocation of that size would make again, so a loop of
 *     allocations and frees does not touch the shared counter each time.
 *
 * Whether an allocation will make the pool grow cannot be told from outside (memory
 * freed on another stream, or in pieces too small, is not reused), so the query after
 * each allocation stays: without it growth could go uncharged.
 *
 * A free asks nothing: it never makes a pool grow.  What a pool gives back (at the next
 * synchronisation, down to its release threshold; at a trim; the mock driver at the
 * free) is given back to the share when the pool is settled exactly (held = known =
 * its reserve): at a trim, an attribute change or the destruction of any pool, at
 * cuMemGetInfo, and whenever a reservation of this process on any path finds the
 * share full (shim_pools_settle), so a stale charge never refuses this process an
 * allocation the share has room for; the pool's next allocation brings it down to the
 * reserve plus the slack.  No synchronisation is hooked: programs synchronise often
 * (benchmarks/shim_overhead.py after every call), a query at each would cost what
 * the free saves, and a charge left standing only over-charges. */
#include "shim_pool.h"

#include <pthread.h>
#include <string.h>

#define MAX_POOLS 256

typedef struct {
    CUmemoryPool pool; /* NULL: destroyed with allocations still out, or an empty slot */
    int card;
    uint64_t limit; /* the card's limit; 0 = not accounted */
    uint64_t slack; /* the most held keeps above the reserve after an allocation: limit / 64 */
    uint64_t known; /* RESERVED_MEM_CURRENT when last asked (see above) */
    uint64_t held;  /* what the share is charged for this pool, >= known */
} pool_t;

static pool_t g_pools[MAX_POOLS];
static int g_npools;
static pool_t *g_last = &g_pools[0]; /* the entry last allocated from (checked by handle) */
/* Each device's current pool (cuMemAllocAsync's), as last asked; cuDeviceSetMemPool
 * and cuMemPoolDestroy clear it. */
static CUmemoryPool g_current[SHIM_MAX_DEVICES];
/* CUDA devices the process sees, 0 until the driver answers: with one, every stream
 * is on device 0, and cuMemAllocAsync needs no question about the current context. */
static int g_devices;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
size_t g_table_count; /* shim_pool.h */

/* What the pools need of the hooks (shim_pool.h). */
#define H shim_pool_host
/* 1 when the process has one thread and no plain allocation out: the hooks' table
 * would find nothing (a free need not ask). */
static inline int tracks_nothing(void) { return LIKELY(__libc_single_threaded) && g_table_count == 0; }

/* A process with one thread needs no lock (nobody else can be in here); the answer
 * is kept, since the driver may start a thread while the lock is held. */
static inline int lock(void) {
    if (LIKELY(__libc_single_threaded)) return 0;
    pthread_mutex_lock(&g_lock);
    return 1;
}
static inline void unlock(int locked) {
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
    CUresult (*stream_device)(CUstream, CUdevice *);
    CUresult (*stream_ctx)(CUstream, CUcontext *);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
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

/* A driver without pool attributes: no figure can be read, so the charge made before
 * each allocation stays, and adds up (over-charging, never the other way). */
static CUresult no_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    (void)pool, (void)attr, (void)value;
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define LOAD_REAL(field, name) R.field = (__typeof__(R.field))H.real_cuda(name)
static void load(void) {
    LOAD_REAL(get_attr, "cuMemPoolGetAttribute");
    LOAD_REAL(device_pool, "cuDeviceGetMemPool");
    LOAD_REAL(default_pool, "cuDeviceGetDefaultMemPool");
    LOAD_REAL(device_count, "cuDeviceGetCount");
    LOAD_REAL(ctx_device, "cuCtxGetDevice");
    LOAD_REAL(stream_device, "cuStreamGetDevice");
    LOAD_REAL(stream_ctx, "cuStreamGetCtx");
    LOAD_REAL(ctx_push, "cuCtxPushCurrent_v2");
    LOAD_REAL(ctx_pop, "cuCtxPopCurrent_v2");
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
    if (!R.get_attr) R.get_attr = no_attr;
}

/* Every hook starts here: the mode decides whether it accounts.  Once the real entry
 * points are loaded and the shim is known to limit, a load and a test. */
static int g_accounting;
static __attribute__((noinline)) shim_mode_t first_call(void) {
    shim_mode_t m = H.cuda_mode();
    pthread_once(&g_once, load);
    if (m == SHIM_LIMITED) __atomic_store_n(&g_accounting, 1, __ATOMIC_RELEASE);
    return m;
}
#define PREAMBLE(real, forward_call)                                   \
    if (UNLIKELY(!__atomic_load_n(&g_accounting, __ATOMIC_ACQUIRE))) { \
        shim_mode_t m_ = first_call();                                 \
        if (m_ == SHIM_BROKEN) return H.refuse_cuda();                 \
        if (!(real)) return CUDA_ERROR_NOT_FOUND;                      \
        if (m_ != SHIM_LIMITED) return forward_call;                   \
    }                                                                  \
    if (UNLIKELY(!(real))) return CUDA_ERROR_NOT_FOUND

static inline uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

static inline uint64_t pool_figure(CUmemoryPool pool, CUmemPool_attribute attr, int *ok) {
    cuuint64_t v = 0;
    *ok = pool && R.get_attr(pool, attr, &v) == CUDA_SUCCESS;
    return v;
}

/* Settle the pool exactly: charge the share for what it holds now; 1 if something was
 * given back. */
static int settle(pool_t *e) {
    int ok;
    uint64_t now = pool_figure(e->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &ok);
    if (!ok || e->card < 0) return 0;
    int gave = 0;
    if (now > e->held) {
        usage_force_reserve(e->card, now - e->held); /* the driver has it already */
    } else if (now < e->held) {
        usage_give_back(e->card, e->held - now);
        gave = 1;
    }
    e->held = e->known = now;
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

/* After fork, in the child: the parent's pools are charged to the parent's slot, and
 * CUDA state does not survive fork. */
void shim_pools_forget(void) {
    pthread_mutex_init(&g_lock, NULL); /* another thread may have held it at fork */
    memset(g_pools, 0, sizeof g_pools);
    memset(g_current, 0, sizeof g_current);
    g_npools = 0;
    g_last = &g_pools[0];
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
                return H.card_of_device(d);
        }
    return H.current_card();
}

/* The entry of a pool (not NULL); lock held. */
static pool_t *find(CUmemoryPool pool) {
    for (int i = 0; i < g_npools; i++)
        if (g_pools[i].pool == pool) return &g_pools[i];
    return NULL;
}

static void set_card(pool_t *e, int card) {
    e->card = card;
    e->limit = H.card_limit(card);
    e->slack = e->limit / 64;
}

static pool_t *add(CUmemoryPool pool, int card) {
    if (g_npools == MAX_POOLS) return NULL;
    pool_t *e = &g_pools[g_npools];
    *e = (pool_t){.pool = pool};
    set_card(e, card);
    __atomic_store_n(&g_npools, g_npools + 1, __ATOMIC_RELEASE);
    return e;
}

/* The last entry takes e's place; its old slot is emptied, so g_last never finds a
 * copy there. */
static void drop(pool_t *e) {
    pool_t *last = &g_pools[g_npools - 1];
    *e = *last;
    *last = (pool_t){0};
    __atomic_store_n(&g_npools, g_npools - 1, __ATOMIC_RELEASE);
}

/* The entry of a pool allocated from, registering a pool met for the first time;
 * NULL when there is no room to track it.  Lock held. */
static __attribute__((noinline)) pool_t *entry_slow(CUmemoryPool pool) {
    pool_t *e = find(pool);
    if (!e) e = add(pool, card_of_pool(pool));
    if (e) g_last = e;
    return e;
}
static inline pool_t *entry(CUmemoryPool pool) {
    pool_t *e = g_last;
    return LIKELY(e->pool == pool) ? e : entry_slow(pool);
}

/* Make held cover known + bytes when the share has no room for the difference: settle
 * the pool (it may have shrunk since known was read), count what it holds unused,
 * and at last settle the other pools too.  Lock held, e->limit set; 0, or -1 when
 * the share has no room. */
static __attribute__((noinline)) int precharge_slow(pool_t *e, uint64_t bytes) {
    settle(e);
    int ok;
    uint64_t used = pool_figure(e->pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &ok);
    uint64_t idle = ok && e->known > used ? e->known - used : 0;
    uint64_t grow = bytes > idle ? bytes - idle : 0;
    for (int round = 0; round < 2; round++) {
        uint64_t need = sat_add(e->known, grow);
        if (need <= e->held) return 0;
        if (usage_reserve(e->card, need - e->held, e->limit) == 0) {
            e->held = need;
            return 0;
        }
        if (round == 0 && !settle_all_locked()) break; /* nothing came back: no room */
    }
    return -1;
}

/* Before an allocation of bytes: held covers known + bytes (the pool growing by the
 * whole size), reserving the difference on the share. */
static inline int precharge(pool_t *e, uint64_t bytes) {
    uint64_t need = e->known + bytes;
    if (LIKELY(need >= bytes)) { /* no overflow */
        if (LIKELY(need <= e->held)) return 0;
        if (LIKELY(usage_reserve(e->card, need - e->held, e->limit) == 0)) {
            e->held = need;
            return 0;
        }
    }
    return precharge_slow(e, bytes);
}

/* After an allocation of bytes (answer rc), the pool holding now: settle held on it.
 * Growth beyond held is charged (the driver has it already) and, if that breaks the
 * share, the allocation is undone.  Otherwise held keeps at most one allocation of
 * this size above the reserve after a success (see the top), none after a failure. */
static __attribute__((noinline)) CUresult grew(pool_t *e, uint64_t now, CUresult rc, CUdeviceptr *dptr, CUstream s,
                                               free_async_fn *undo) {
    usage_force_reserve(e->card, now - e->held);
    e->held = e->known = now;
    if (rc == CUDA_SUCCESS && usage_of(e->card) > e->limit) {
        if (*undo) (*undo)(*dptr, s);
        settle(e);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}
static inline CUresult settle_after(pool_t *e, uint64_t now, uint64_t bytes, CUresult rc, CUdeviceptr *dptr, CUstream s,
                                    free_async_fn *undo) {
    if (UNLIKELY(now > e->held)) return grew(e, now, rc, dptr, s, undo);
    uint64_t keep = LIKELY(rc == CUDA_SUCCESS) ? sat_add(now, bytes < e->slack ? bytes : e->slack) : now;
    if (UNLIKELY(e->held > keep)) {
        usage_give_back(e->card, e->held - keep);
        e->held = keep;
    }
    e->known = now;
    return rc;
}

/* One stream-ordered allocation from pool through the real entry point (exactly one
 * of by_stream and from_pool is set; *undo frees it again); lock held. */
static inline __attribute__((always_inline)) CUresult alloc_locked(CUmemoryPool pool, CUdeviceptr *dptr, size_t bytes,
                                                                   CUstream s, alloc_async_fn by_stream,
                                                                   from_pool_fn from_pool, free_async_fn *undo) {
#define FORWARD() (by_stream ? by_stream(dptr, bytes, s) : from_pool(dptr, bytes, pool, s))
    pool_t *e = entry(pool);
    if (UNLIKELY(!e || !e->limit)) /* no limit on its card, or no room to account for another pool */
        return e ? FORWARD() : CUDA_ERROR_OUT_OF_MEMORY;
    if (UNLIKELY(precharge(e, bytes) != 0)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = FORWARD();
    cuuint64_t now;
    if (LIKELY(R.get_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now) == CUDA_SUCCESS))
        rc = settle_after(e, now, bytes, rc, dptr, s, undo);
    else
        e->known = e->held; /* not told: the pool may hold all that is charged */
    return rc;
#undef FORWARD
}

static __attribute__((noinline)) CUresult alloc_threaded(CUmemoryPool pool, CUdeviceptr *dptr, size_t bytes, CUstream s,
                                                         alloc_async_fn by_stream, from_pool_fn from_pool,
                                                         free_async_fn *undo) {
    int locked = lock();
    CUresult rc = alloc_locked(pool, dptr, bytes, s, by_stream, from_pool, undo);
    unlock(locked);
    return rc;
}

/* The same, taking the lock; inlined where by_stream and from_pool are constants, so
 * that a process with one thread runs a copy of its own. */
static inline __attribute__((always_inline)) CUresult alloc_in(CUmemoryPool pool, CUdeviceptr *dptr, size_t bytes,
                                                               CUstream s, alloc_async_fn by_stream,
                                                               from_pool_fn from_pool, free_async_fn *undo) {
    if (LIKELY(__libc_single_threaded)) return alloc_locked(pool, dptr, bytes, s, by_stream, from_pool, undo);
    return alloc_threaded(pool, dptr, bytes, s, by_stream, from_pool, undo);
}

/* The device of a cuMemAllocAsync: device 0 when the process sees one, else the
 * stream's (the driver allocates from the pool of the stream's device, whatever
 * context is current: a stream of card 1 must be charged to card 1), the current
 * context's for the default streams; -1 if unknown. */
static CUdevice device_of_stream(CUstream s) {
    CUdevice dev;
#ifndef SHIM_HAMI_LIKE /* HAMi-core charges the current device whatever the stream */
    /* fault stream-current-card: the current card is charged, as below */
    if (s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD &&
        !(shim_config()->fault & SHIM_FAULT_STREAM_CURRENT_CARD)) {
        if (R.stream_device && R.stream_device(s, &dev) == CUDA_SUCCESS) return dev;
        CUcontext ctx, popped;
        if (!R.stream_ctx || !R.ctx_push || !R.ctx_pop || R.stream_ctx(s, &ctx) != CUDA_SUCCESS ||
            R.ctx_push(ctx) != CUDA_SUCCESS)
            return -1;
        CUresult rc = R.ctx_device ? R.ctx_device(&dev) : CUDA_ERROR_NOT_FOUND;
        R.ctx_pop(&popped);
        return rc == CUDA_SUCCESS ? dev : -1;
    }
#else
    (void)s;
#endif
    return R.ctx_device && R.ctx_device(&dev) == CUDA_SUCCESS ? dev : -1;
}
static __attribute__((noinline)) CUdevice async_device_slow(CUstream s) {
    int n = __atomic_load_n(&g_devices, __ATOMIC_RELAXED);
    if (n == 0 && R.device_count && R.device_count(&n) == CUDA_SUCCESS) __atomic_store_n(&g_devices, n, __ATOMIC_RELAXED);
    if (n == 1) return 0;
    return device_of_stream(s);
}
static inline CUdevice async_device(CUstream s) {
    return LIKELY(__atomic_load_n(&g_devices, __ATOMIC_RELAXED) == 1) ? 0 : async_device_slow(s);
}

static inline __attribute__((always_inline)) CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream s,
                                                                  alloc_async_fn real, free_async_fn *undo) {
    CUdevice dev;
    if (UNLIKELY(!dptr || bytes == 0) || UNLIKELY((dev = async_device(s)) < 0 || dev >= SHIM_MAX_DEVICES))
        return real(dptr, bytes, s); /* the driver answers with its own error */
    CUmemoryPool pool = __atomic_load_n(&g_current[dev], __ATOMIC_ACQUIRE);
    if (UNLIKELY(!pool)) {
        if (!R.device_pool || R.device_pool(&pool, dev) != CUDA_SUCCESS) return real(dptr, bytes, s);
        __atomic_store_n(&g_current[dev], pool, __ATOMIC_RELEASE);
    }
    return alloc_in(pool, dptr, bytes, s, real, NULL, undo);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    PREAMBLE(R.alloc_async, R.alloc_async(dptr, bytesize, hStream));
    return alloc_async(dptr, bytesize, hStream, R.alloc_async, &R.free_async);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    PREAMBLE(R.alloc_async_ptsz, R.alloc_async_ptsz(dptr, bytesize, hStream));
    return alloc_async(dptr, bytesize, hStream, R.alloc_async_ptsz, &R.free_async_ptsz);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    PREAMBLE(R.from_pool, R.from_pool(dptr, bytesize, pool, hStream));
    if (UNLIKELY(!dptr || bytesize == 0 || !pool)) return R.from_pool(dptr, bytesize, pool, hStream);
    return alloc_in(pool, dptr, bytesize, hStream, NULL, R.from_pool, &R.free_async);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    PREAMBLE(R.from_pool_ptsz, R.from_pool_ptsz(dptr, bytesize, pool, hStream));
    if (UNLIKELY(!dptr || bytesize == 0 || !pool)) return R.from_pool_ptsz(dptr, bytesize, pool, hStream);
    return alloc_in(pool, dptr, bytesize, hStream, NULL, R.from_pool_ptsz, &R.free_async_ptsz);
}

/* A plain allocation freed in stream order is given back like cuMemFree.  Memory of a
 * pool goes back to the pool: nothing to ask (a free never makes a pool grow; what the
 * pool gives back is un-charged when it is next settled, see the top). */
static __attribute__((noinline)) CUresult free_tracked(CUdeviceptr dptr, CUstream s, free_async_fn real) {
    int card;
    uint64_t bytes;
    if (!H.untrack(dptr, &card, &bytes)) return real(dptr, s);
    CUresult rc = real(dptr, s);
    if (rc == CUDA_SUCCESS) usage_give_back(card, bytes);
    else H.track(dptr, card, bytes);
    return rc;
}

static inline CUresult free_async(CUdeviceptr dptr, CUstream s, free_async_fn real) {
    return LIKELY(tracks_nothing()) ? real(dptr, s) : free_tracked(dptr, s, real);
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
        int card = poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? H.card_of_device(poolProps->location.id)
                                                                            : H.current_card();
        int locked = lock();
        pool_t *e = find(*pool);
        if (e) set_card(e, card); /* a handle the driver reused */
        else if (!add(*pool, card)) rc = CUDA_ERROR_OUT_OF_MEMORY;
        unlock(locked);
        if (rc != CUDA_SUCCESS) R.destroy(*pool);
    }
    return rc;
}

/* What the pool holds unused goes back with it; allocations still out stay charged
 * until the process ends (the pool can no longer be asked what it holds).  A rare
 * call, often part of tearing down: the other pools are settled too. */
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    PREAMBLE(R.destroy, R.destroy(pool));
    int locked = lock();
    pool_t *e = pool ? find(pool) : NULL;
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
        if (e->held > used && e->card >= 0) usage_give_back(e->card, e->held - used);
        e->held = e->known = used;
        if (used == 0) drop(e);
        else e->pool = NULL; /* keeps its charge; settle() cannot query it any more */
    }
    settle_all_locked();
    unlock(locked);
    return rc;
}

/* Calls after which a pool may hold less (rare): every pool is settled exactly. */
EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    PREAMBLE(R.trim, R.trim(pool, minBytesToKeep));
    return shim_pools_settle_after(R.trim(pool, minBytesToKeep));
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    PREAMBLE(R.set_attr, R.set_attr(pool, attr, value));
    return shim_pools_settle_after(R.set_attr(pool, attr, value));
}

EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    PREAMBLE(R.set_device_pool, R.set_device_pool(dev, pool));
    CUresult rc = R.set_device_pool(dev, pool);
    if (dev >= 0 && dev < SHIM_MAX_DEVICES) __atomic_store_n(&g_current[dev], NULL, __ATOMIC_RELEASE);
    return rc;
}
