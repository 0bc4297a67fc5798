/* Pitched copies of the mock driver (cuMemcpy2D, cuMemcpy3D and the peer copy) over
 * host-backed device memory.  Each side is host, device or unified memory; CUDA
 * arrays are not modelled (CUDA_ERROR_NOT_SUPPORTED).  The whole span a device side
 * covers must lie in one allocation, else CUDA_ERROR_INVALID_VALUE. */
#include "cuda_internal.h"

#include <string.h>

typedef struct {
    CUmemorytype type;
    const void *host;
    CUdeviceptr device;
    size_t x, y, z, pitch, height;
} side_t;

/* Address of the side's first byte and whether the driver must know it; lock held. */
static CUresult locate(const side_t *s, size_t width, size_t rows, size_t depth, unsigned char **out) {
    if (s->type == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_DEVICE && s->type != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = s->pitch ? s->pitch : width, height = s->height ? s->height : rows;
    if (pitch < s->x + width) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = s->type == CU_MEMORYTYPE_HOST ? (uintptr_t)s->host : (uintptr_t)s->device;
    if (!base) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t first = base + (s->z * height + s->y) * pitch + s->x;
    size_t span = ((depth - 1) * height + (rows - 1)) * pitch + width;
    if (s->type == CU_MEMORYTYPE_DEVICE && !cuda_range_find(first, span)) return CUDA_ERROR_INVALID_VALUE;
    *out = (unsigned char *)first;
    return CUDA_SUCCESS;
}

static CUresult copy3d(const side_t *src, const side_t *dst, size_t width, size_t rows, size_t depth) {
    CHECK_INIT();
    if (width == 0 || rows == 0 || depth == 0) return CUDA_SUCCESS;
    pthread_mutex_lock(&cuda_lock);
    unsigned char *s, *d;
    CUresult rc = locate(src, width, rows, depth, &s);
    if (rc == CUDA_SUCCESS) rc = locate(dst, width, rows, depth, &d);
    if (rc == CUDA_SUCCESS) {
        size_t sp = src->pitch ? src->pitch : width, dp = dst->pitch ? dst->pitch : width;
        size_t sh = src->height ? src->height : rows, dh = dst->height ? dst->height : rows;
        for (size_t z = 0; z < depth; z++)
            for (size_t y = 0; y < rows; y++) memmove(d + (z * dh + y) * dp, s + (z * sh + y) * sp, width);
    }
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    side_t src = {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0};
    side_t dst = {c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0};
    return copy3d(&src, &dst, c->WidthInBytes, c->Height, 1);
}

static CUresult copy3d_desc(const CUDA_MEMCPY3D *c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (c->srcLOD || c->dstLOD) return CUDA_ERROR_INVALID_VALUE;
    side_t src = {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight};
    side_t dst = {c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight};
    return copy3d(&src, &dst, c->WidthInBytes, c->Height, c->Depth);
}

static CUresult stream_ok(CUstream s) {
    CHECK_INIT();
    int dev;
    return cuda_stream_device(s, &dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy); }
EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy); }
EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy); }
EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy); }
EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
    CUresult rc = stream_ok(hStream);
    return rc != CUDA_SUCCESS ? rc : copy2d(pCopy);
}
EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { return cuMemcpy2DAsync_v2(pCopy, hStream); }

EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) { return copy3d_desc(pCopy); }
EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) { return copy3d_desc(pCopy); }
EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
    CUresult rc = stream_ok(hStream);
    return rc != CUDA_SUCCESS ? rc : copy3d_desc(pCopy);
}
EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream) { return cuMemcpy3DAsync_v2(pCopy, hStream); }

/* Peer copies: both contexts must be live; the bytes move like cuMemcpyDtoD. */
EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                             size_t ByteCount) {
    CHECK_INIT();
    if (cuda_context_device(dstContext) < 0 || cuda_context_device(srcContext) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    return cuMemcpyDtoD_v2(dstDevice, srcDevice, ByteCount);
}
EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { return cuMemcpyPeer(d, dc, s, sc, n); }
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream hStream) {
    CUresult rc = stream_ok(hStream);
    return rc != CUDA_SUCCESS ? rc : cuMemcpyPeer(d, dc, s, sc, n);
}
EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream hStream) {
    return cuMemcpyPeerAsync(d, dc, s, sc, n, hStream);
}
