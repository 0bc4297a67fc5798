/* CUDA arrays of the mock driver: device memory in an opaque layout, charged to the
 * current context's card for their element bytes (cuda_array_size.h).  Their
 * contents are not modelled: copies to and from arrays are not supported. */
#include "cuda_internal.h"

#include <stdlib.h>

#include "cuda_array_size.h"

#define ARRAY_MAGIC 0x61727231u

struct CUarray_st {
    unsigned magic;
    int device;
    uint64_t bytes;
    CUDA_ARRAY3D_DESCRIPTOR desc;
};

static CUresult create(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pHandle || !d) return CUDA_ERROR_INVALID_VALUE;
    if (d->Flags) return CUDA_ERROR_NOT_SUPPORTED; /* layered, surface, cubemap arrays */
    if (!cuda_array_element_bytes(d->Format) && d->Width) return CUDA_ERROR_NOT_SUPPORTED;
    uint64_t bytes = cuda_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = malloc(sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cuda_lock);
    int fits = cuda_card_take(dev, bytes) == 0;
    pthread_mutex_unlock(&cuda_lock);
    if (!fits) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct CUarray_st){ARRAY_MAGIC, dev, bytes, *d};
    *pHandle = a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
    if (!pAllocateArray) return create(pHandle, NULL);
    CUDA_ARRAY3D_DESCRIPTOR d = {pAllocateArray->Width, pAllocateArray->Height, 0, pAllocateArray->Format,
                                 pAllocateArray->NumChannels, 0};
    return create(pHandle, &d);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
    return create(pHandle, pAllocateArray);
}

/* Handles are checked by their magic: the mock trusts the caller not to pass freed
 * memory, as the driver does. */
static struct CUarray_st *live(CUarray a) { return a && a->magic == ARRAY_MAGIC ? a : NULL; }

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
    CHECK_INIT();
    struct CUarray_st *a = live(hArray);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cuda_lock);
    cuda_card_give(a->device, a->bytes);
    pthread_mutex_unlock(&cuda_lock);
    a->magic = 0;
    free(a);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray) {
    CHECK_INIT();
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = live(hArray);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    *pArrayDescriptor = a->desc;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray) {
    CHECK_INIT();
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = live(hArray);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    if (a->desc.Depth) return CUDA_ERROR_INVALID_VALUE; /* a 3D array: use the 3D query */
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){a->desc.Width, a->desc.Height, a->desc.Format, a->desc.NumChannels};
    return CUDA_SUCCESS;
}
