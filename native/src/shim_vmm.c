/* The share on the virtual-memory path.  What counts is the physical allocation
 * (cuMemCreate), not the address reservation: cuMemCreate reserves its size on the
 * card of prop->location before the driver is asked, and the bytes are given back
 * when the driver frees them, which is when the last handle reference is released
 * (cuMemRelease, balanced against cuMemCreate and cuMemRetainAllocationHandle) and no
 * mapping is left (cuMemUnmap).  Mirrors the driver's rule, so the share is never
 * freed early while a mapping still holds the memory. */
#include "shim_cuda.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct handle_rec {
    CUmemGenericAllocationHandle handle;
    int card;
    uint64_t bytes;
    int refs, maps;
    struct handle_rec *next;
} handle_rec_t;

typedef struct map_rec {
    CUdeviceptr base;
    size_t size;
    handle_rec_t *h;
    struct map_rec *next;
} map_rec_t;

static handle_rec_t *g_handles;
static map_rec_t *g_maps;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* A process with one thread needs no lock; the answer is kept for the unlock, since
 * the driver may start a thread while the lock is held. */
static int lock(void) {
    if (__libc_single_threaded) return 0;
    pthread_mutex_lock(&g_lock);
    return 1;
}
static void unlock(int locked) {
    if (locked) pthread_mutex_unlock(&g_lock);
}

static struct {
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*retain)(CUmemGenericAllocationHandle *, void *);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
} R;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void) {
    R.create = (__typeof__(R.create))shim_real_cuda("cuMemCreate");
    R.release = (__typeof__(R.release))shim_real_cuda("cuMemRelease");
    R.retain = (__typeof__(R.retain))shim_real_cuda("cuMemRetainAllocationHandle");
    R.map = (__typeof__(R.map))shim_real_cuda("cuMemMap");
    R.unmap = (__typeof__(R.unmap))shim_real_cuda("cuMemUnmap");
}

/* Records of released handles and removed mappings are kept for reuse (a list
 * as long as the most the process ever held at once): malloc and free per
 * allocation would cost more than the accounting itself.  Callers hold the lock. */
static handle_rec_t *g_spare_handles;
static map_rec_t *g_spare_maps;

static handle_rec_t *new_handle_rec(void) {
    handle_rec_t *r = g_spare_handles;
    if (!r) return malloc(sizeof *r);
    g_spare_handles = r->next;
    return r;
}

static map_rec_t *new_map_rec(void) {
    map_rec_t *m = g_spare_maps;
    if (!m) return malloc(sizeof *m);
    g_spare_maps = m->next;
    return m;
}

static void spare_map_rec(map_rec_t *m) {
    m->next = g_spare_maps;
    g_spare_maps = m;
}

#define PREAMBLE(real, forward_call)                  \
    shim_mode_t m_ = shim_cuda_mode();                \
    pthread_once(&g_once, load);                      \
    if (m_ == SHIM_BROKEN) return shim_refuse_cuda(); \
    if (!(real)) return CUDA_ERROR_NOT_FOUND;         \
    if (m_ != SHIM_LIMITED) return forward_call

static handle_rec_t *find(CUmemGenericAllocationHandle h) {
    for (handle_rec_t *r = g_handles; r; r = r->next)
        if (r->handle == h) return r;
    return NULL;
}

/* The driver frees the memory once nothing refers to it: so does the share. */
static void drop_if_done(handle_rec_t *r) {
    if (r->refs > 0 || r->maps > 0) return;
    usage_release(r->card, r->bytes);
    for (handle_rec_t **p = &g_handles; *p; p = &(*p)->next)
        if (*p == r) { *p = r->next; break; }
    r->next = g_spare_handles;
    g_spare_handles = r;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    PREAMBLE(R.create, R.create(handle, size, prop, flags));
    if (!handle || !prop || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return R.create(handle, size, prop, flags);
    int card = shim_card_of_device(prop->location.id);
    uint64_t limit = shim_card_limit(card);
    if (!limit) return card < 0 && prop->location.id >= 0 ? CUDA_ERROR_INVALID_DEVICE : R.create(handle, size, prop, flags);
    if (usage_reserve(card, size, limit) != 0 && (!shim_pools_settle() || usage_reserve(card, size, limit) != 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = R.create(handle, size, prop, flags);
    if (rc != CUDA_SUCCESS) {
        usage_release(card, size);
        return rc;
    }
    int locked = lock();
    handle_rec_t *r = new_handle_rec();
    if (r) {
        *r = (handle_rec_t){*handle, card, size, 1, 0, g_handles};
        g_handles = r;
    }
    unlock(locked);
    if (!r) { /* cannot track it: undo, so that no untracked memory escapes the share */
        R.release(*handle);
        usage_release(card, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

/* Fault vmm-release-frees: the share is given back with the last handle reference,
 * while a mapping still holds the memory (the record stays, charging nothing, until
 * the last unmap). */
static void release_early(handle_rec_t *r) {
    if (r->refs > 0 || !r->bytes || !(shim_config()->fault & SHIM_FAULT_VMM_RELEASE_FREES)) return;
    usage_release(r->card, r->bytes);
    r->bytes = 0;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    PREAMBLE(R.release, R.release(handle));
    int locked = lock();
    CUresult rc = R.release(handle);
    handle_rec_t *r;
    if (rc == CUDA_SUCCESS && (r = find(handle)) != NULL) {
        r->refs--;
        release_early(r);
        drop_if_done(r);
    }
    unlock(locked);
    return rc;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    PREAMBLE(R.retain, R.retain(handle, addr));
    int locked = lock();
    CUresult rc = R.retain(handle, addr);
    handle_rec_t *r;
    if (rc == CUDA_SUCCESS && (r = find(*handle)) != NULL) r->refs++;
    unlock(locked);
    return rc;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
    PREAMBLE(R.map, R.map(ptr, size, offset, handle, flags));
    int locked = lock();
    map_rec_t *m = new_map_rec();
    if (!m) {
        unlock(locked);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = R.map(ptr, size, offset, handle, flags);
    handle_rec_t *r;
    if (rc == CUDA_SUCCESS && (r = find(handle)) != NULL) {
        *m = (map_rec_t){ptr, size, r, g_maps};
        g_maps = m;
        r->maps++;
    } else {
        spare_map_rec(m);
    }
    unlock(locked);
    return rc;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    PREAMBLE(R.unmap, R.unmap(ptr, size));
    int locked = lock();
    CUresult rc = R.unmap(ptr, size);
    if (rc == CUDA_SUCCESS) {
        for (map_rec_t **p = &g_maps; *p;) {
            map_rec_t *m = *p;
            if (m->base >= ptr && m->base + m->size <= ptr + size) {
                *p = m->next;
                m->h->maps--;
                drop_if_done(m->h);
                spare_map_rec(m);
            } else {
                p = &m->next;
            }
        }
    }
    unlock(locked);
    return rc;
}
