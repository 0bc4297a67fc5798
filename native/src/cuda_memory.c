/* Device and host memory of the mock driver: cuMemAlloc and its pitched, managed and
 * legacy 32-bit forms, host allocations and registrations, and the memory queries.
 * Device memory is backed by host pages (mapped lazily, so a 16 GiB card costs only
 * what is written) and counted against the card; host memory is not device memory
 * and is not counted. */
#include "cuda_internal.h"

#include <limits.h>
#include <stdint.h>

#define PITCH_ALIGN 512

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
    uint64_t card = cuda_card_size(dev);
    pthread_mutex_lock(&cuda_lock);
    uint64_t taken = cuda_card_taken(dev);
    pthread_mutex_unlock(&cuda_lock);
    *total = (size_t)card;
    *free = (size_t)(taken >= card ? 0 : card - taken);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
    if (!free || !total) return cuMemGetInfo_v2(NULL, NULL);
    size_t f, t;
    CUresult rc = cuMemGetInfo_v2(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    if (!cuda_stub_initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!cuda_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    uint64_t card = cuda_card_size(dev);
    *bytes = card > UINT_MAX ? UINT_MAX : (unsigned int)card;
    return CUDA_SUCCESS;
}

/* Take bytes on the current context's card and back them with host pages. */
static CUresult device_alloc(uintptr_t *out, size_t bytes, range_kind_t kind, int legacy32) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    void *p = NULL;
    if (cuda_card_take(dev, bytes) != 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!(p = cuda_backing_map(bytes, legacy32))) {
        cuda_card_give(dev, bytes);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        cuda_range_t r = {(uintptr_t)p, bytes, dev, kind, NULL};
        if (cuda_range_add(&r) != 0) {
            cuda_backing_unmap(p, bytes);
            cuda_card_give(dev, bytes);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            *out = (uintptr_t)p;
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    uintptr_t p;
    CUresult rc = device_alloc(dptr ? &p : NULL, bytesize, RANGE_DEVICE, 0);
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    return rc;
}

/* The 32-bit entry points of CUDA 2.x: the memory must sit below 4 GiB. */
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    uintptr_t p;
    CUresult rc = device_alloc(dptr ? &p : NULL, bytesize, RANGE_DEVICE, 1);
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr_v1)p;
    return rc;
}

static CUresult pitch_of(size_t width, size_t height, unsigned int elem, size_t *pitch) {
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + PITCH_ALIGN - 1) & ~(size_t)(PITCH_ALIGN - 1);
    if (*pitch != 0 && height > SIZE_MAX / *pitch) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                   unsigned int ElementSizeBytes) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    size_t pitch;
    if (!dptr || !pPitch) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch)) != CUDA_SUCCESS) return rc;
    uintptr_t p;
    rc = device_alloc(&p, pitch * Height, RANGE_DEVICE, 0);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr)p;
        *pPitch = pitch;
    }
    return rc;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                unsigned int Height, unsigned int ElementSizeBytes) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    size_t pitch;
    if (!dptr || !pPitch) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = pitch_of(WidthInBytes, Height, ElementSizeBytes, &pitch)) != CUDA_SUCCESS) return rc;
    if (pitch > UINT_MAX) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    rc = device_alloc(&p, pitch * Height, RANGE_DEVICE, 1);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    rc = device_alloc(dptr ? &p : NULL, bytesize, RANGE_MANAGED, 0);
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    CHECK_INIT();
    if (dptr == 0) return CUDA_SUCCESS; /* freeing NULL is a no-op */
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)dptr, 0);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (r && r->base == (uintptr_t)dptr && (r->kind == RANGE_DEVICE || r->kind == RANGE_MANAGED)) {
        cuda_card_give(r->device, r->size);
        cuda_backing_unmap((void *)r->base, r->size);
        cuda_range_remove(r);
        rc = CUDA_SUCCESS;
    } else if (r && r->base == (uintptr_t)dptr && r->kind == RANGE_POOL) {
        rc = cuda_pool_free(r); /* cuMemFree also frees stream-ordered memory */
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2((CUdeviceptr)dptr); }

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)dptr, 0);
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (r && r->device >= 0) {
        if (pbase) *pbase = (CUdeviceptr)r->base;
        if (psize) *psize = r->size;
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

/* ---- host memory: page-locked in a real driver, never counted against a card ---- */

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    void *p = cuda_backing_map(bytesize, 0);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t r = {(uintptr_t)p, bytesize, -1, RANGE_HOST, NULL};
    if (cuda_range_add(&r) != 0) {
        cuda_backing_unmap(p, bytesize);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *pp = p;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }
EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }

EXPORT CUresult cuMemFreeHost(void *p) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)p, 0);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (p && r && r->base == (uintptr_t)p && r->kind == RANGE_HOST) {
        cuda_backing_unmap(p, r->size);
        cuda_range_remove(r);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned int)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    if (cuda_range_find((uintptr_t)p, 0) || cuda_range_find((uintptr_t)p + bytesize - 1, 0)) {
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else {
        cuda_range_t r = {(uintptr_t)p, bytesize, -1, RANGE_HOST_REGISTERED, NULL};
        if (cuda_range_add(&r) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) { return cuMemHostRegister_v2(p, bytesize, Flags); }

EXPORT CUresult cuMemHostUnregister(void *p) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)p, 0);
    CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (p && r && r->base == (uintptr_t)p && r->kind == RANGE_HOST_REGISTERED) {
        cuda_range_remove(r);
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

/* Unified addressing: a host allocation's device address is its host address. */
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
    CHECK_INIT();
    if (!pdptr || !p || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)p, 0);
    int ok = r && (r->kind == RANGE_HOST || r->kind == RANGE_HOST_REGISTERED);
    pthread_mutex_unlock(&cuda_lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p) {
    CHECK_INIT();
    if (!pFlags || !p) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cuda_lock);
    cuda_range_t *r = cuda_range_find((uintptr_t)p, 0);
    int ok = r && (r->kind == RANGE_HOST || r->kind == RANGE_HOST_REGISTERED);
    pthread_mutex_unlock(&cuda_lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    *pFlags = 0;
    return CUDA_SUCCESS;
}
