/* Virtual memory management of the mock driver: address reservations, physical
 * allocations, and the mappings between them.  A reservation is inaccessible host
 * address space; a physical allocation is a memory file, counted against its card
 * from cuMemCreate until it is released and no longer mapped (as the driver frees it);
 * mapping places the file's pages at the reserved address, so two mappings of one
 * allocation share their bytes.  cuMemSetAccess makes a mapping readable and
 * writable, and registers it for copies. */
#include "cuda_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_RESERVATIONS 1024
#define MAX_MAPPINGS 4096

typedef struct phys {
    int fd;
    int device;
    size_t size;
    int refs; /* cuMemCreate and cuMemRetainAllocationHandle take one, cuMemRelease drops one */
    int maps;
    struct phys *next;
} phys_t;

typedef struct { uintptr_t base; size_t size; } reservation_t;
typedef struct { uintptr_t base; size_t size; phys_t *phys; int accessible; } mapping_t;

static phys_t *g_phys;
static reservation_t g_res[MAX_RESERVATIONS];
static mapping_t g_map[MAX_MAPPINGS];
/* One past the last slot in use: scans stop there. */
static int g_res_end, g_map_end;

static void trim_ends(void) {
    while (g_res_end > 0 && !g_res[g_res_end - 1].size) g_res_end--;
    while (g_map_end > 0 && !g_map[g_map_end - 1].size) g_map_end--;
}

static phys_t *phys_of(CUmemGenericAllocationHandle h) {
    for (phys_t *p = g_phys; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == h && p->refs > 0) return p;
    return NULL;
}

static void phys_free_if_done(phys_t *p) {
    if (p->refs > 0 || p->maps > 0) return;
    cuda_card_give(p->device, p->size);
    close(p->fd);
    for (phys_t **q = &g_phys; *q; q = &(*q)->next)
        if (*q == p) { *q = p->next; break; }
    free(p);
}

static CUresult check_prop(const CUmemAllocationProp *prop) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cuda_device_valid(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option) {
    CHECK_INIT();
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS) return rc;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags) {
    CHECK_INIT();
    if (!ptr || size == 0 || size % VMM_GRANULARITY || flags != 0 ||
        (alignment && (alignment & (alignment - 1))))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    /* Over-reserve and trim to the alignment. */
    void *raw = mmap((void *)(uintptr_t)addr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (start > (uintptr_t)raw) munmap(raw, start - (uintptr_t)raw);
    size_t tail = (uintptr_t)raw + size + align - (start + size);
    if (tail) munmap((void *)(start + size), tail);
    pthread_mutex_lock(&cuda_lock);
    reservation_t *slot = NULL;
    for (int i = 0; i < MAX_RESERVATIONS && !slot; i++)
        if (!g_res[i].size) slot = &g_res[i];
    if (slot) {
        *slot = (reservation_t){start, size};
        if (slot - g_res >= g_res_end) g_res_end = (int)(slot - g_res) + 1;
    }
    pthread_mutex_unlock(&cuda_lock);
    if (!slot) {
        munmap((void *)start, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)start;
    return CUDA_SUCCESS;
}

static int any_mapping_in(uintptr_t base, size_t size) {
    for (int i = 0; i < g_map_end; i++)
        if (g_map[i].size && g_map[i].base < base + size && base < g_map[i].base + g_map[i].size) return 1;
    return 0;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < g_res_end; i++)
        if (g_res[i].size && g_res[i].base == (uintptr_t)ptr && g_res[i].size == size) {
            if (any_mapping_in(ptr, size)) break; /* still mapped: unmap first */
            munmap((void *)(uintptr_t)ptr, size);
            g_res[i].size = 0;
            trim_ends();
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    CHECK_INIT();
    if (!handle || size == 0 || size % VMM_GRANULARITY || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS) return rc;
    phys_t *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->fd = memfd_create("gpushare-mock-vmm", MFD_CLOEXEC);
    if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0) {
        if (p->fd >= 0) close(p->fd);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->device = prop->location.id;
    p->size = size;
    p->refs = 1;
    pthread_mutex_lock(&cuda_lock);
    if (cuda_card_take(p->device, size) != 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        p->next = g_phys;
        g_phys = p;
    }
    pthread_mutex_unlock(&cuda_lock);
    if (rc != CUDA_SUCCESS) {
        close(p->fd);
        free(p);
        return rc;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    phys_t *p = phys_of(handle);
    if (p) {
        p->refs--;
        phys_free_if_done(p);
    }
    pthread_mutex_unlock(&cuda_lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int in_reservation(uintptr_t base, size_t size) {
    for (int i = 0; i < g_res_end; i++)
        if (g_res[i].size && base >= g_res[i].base && base + size <= g_res[i].base + g_res[i].size) return 1;
    return 0;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
    CHECK_INIT();
    if (!ptr || size == 0 || flags != 0 || size % VMM_GRANULARITY || offset % VMM_GRANULARITY || ptr % VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_SUCCESS;
    phys_t *p = phys_of(handle);
    mapping_t *slot = NULL;
    for (int i = 0; i < MAX_MAPPINGS && !slot; i++)
        if (!g_map[i].size) slot = &g_map[i];
    if (!p || offset > p->size || size > p->size - offset || !in_reservation(ptr, size) || any_mapping_in(ptr, size))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!slot)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) == MAP_FAILED)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        *slot = (mapping_t){ptr, size, p, 0};
        if (slot - g_map >= g_map_end) g_map_end = (int)(slot - g_map) + 1;
        p->maps++;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    CHECK_INIT();
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    /* The range must cover whole mappings. */
    for (int i = 0; i < g_map_end; i++) {
        mapping_t *m = &g_map[i];
        if (!m->size || m->base < ptr || m->base + m->size > ptr + size) continue;
        if (m->accessible) {
            cuda_range_t *r = cuda_range_find(m->base, 0);
            if (r && r->kind == RANGE_VMM && r->base == m->base) cuda_range_remove(r);
        }
        mmap((void *)m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        phys_t *p = m->phys;
        m->size = 0;
        p->maps--;
        phys_free_if_done(p);
        rc = CUDA_SUCCESS;
    }
    trim_ends();
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    CHECK_INIT();
    if (!ptr || size == 0 || !desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !cuda_device_valid(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < g_map_end; i++) {
        mapping_t *m = &g_map[i];
        if (!m->size || m->base < ptr || m->base + m->size > ptr + size) continue;
        mprotect((void *)m->base, m->size, prot);
        int want = prot != PROT_NONE;
        if (want && !m->accessible) {
            cuda_range_t r = {m->base, m->size, m->phys->device, RANGE_VMM, m->phys};
            if (cuda_range_add(&r) != 0) { rc = CUDA_ERROR_OUT_OF_MEMORY; break; }
        } else if (!want && m->accessible) {
            cuda_range_t *r = cuda_range_find(m->base, 0);
            if (r && r->kind == RANGE_VMM) cuda_range_remove(r);
        }
        m->accessible = want;
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    CHECK_INIT();
    if (!handle || !addr) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < g_map_end; i++) {
        mapping_t *m = &g_map[i];
        if (m->size && (uintptr_t)addr >= m->base && (uintptr_t)addr < m->base + m->size && m->phys->refs > 0) {
            m->phys->refs++;
            *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle) {
    CHECK_INIT();
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    phys_t *p = phys_of(handle);
    if (p) {
        memset(prop, 0, sizeof *prop);
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = p->device;
    }
    pthread_mutex_unlock(&cuda_lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
