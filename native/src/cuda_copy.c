/* Copies and sets on the mock's host-backed device memory: what is written is read
 * back.  A device-side pointer must lie, with its whole length, in memory the driver
 * handed out (device, managed, pool, mapped VMM, or page-locked host memory, which
 * unified addressing makes reachable); anything else is CUDA_ERROR_INVALID_VALUE, as
 * an illegal address would be.  Work completes when issued, so the stream-ordered
 * forms behave like the synchronous ones after checking the stream. */
#include "cuda_internal.h"

#include <string.h>

/* Host address of [p, p + n) of driver memory, or NULL; lock held. */
static void *known(uintptr_t p, size_t n) {
    cuda_range_t *r = cuda_range_find(p, n);
    return r ? (void *)p : NULL;
}

static CUresult copy(void *dst, const void *src, size_t n, int dst_device, int src_device) {
    CHECK_INIT();
    if (n == 0) return CUDA_SUCCESS;
    pthread_mutex_lock(&cuda_lock);
    int ok = (!dst_device || known((uintptr_t)dst, n)) && (!src_device || known((uintptr_t)src, n)) && dst && src;
    if (ok) memmove(dst, src, n);
    pthread_mutex_unlock(&cuda_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult check_stream(CUstream s) {
    CHECK_INIT();
    int dev;
    return cuda_stream_device(s, &dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

#define DPTR(p) ((void *)(uintptr_t)(p))

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    return copy(DPTR(dstDevice), srcHost, ByteCount, 1, 0);
}
EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    return copy(dstHost, DPTR(srcDevice), ByteCount, 0, 1);
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    return copy(DPTR(dstDevice), DPTR(srcDevice), ByteCount, 1, 1);
}

/* Unified addressing: each side is device memory when the driver knows it. */
EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    CHECK_INIT();
    pthread_mutex_lock(&cuda_lock);
    int dst_dev = cuda_range_find((uintptr_t)dst, 0) != NULL, src_dev = cuda_range_find((uintptr_t)src, 0) != NULL;
    pthread_mutex_unlock(&cuda_lock);
    if (!dst_dev && !src_dev) return CUDA_ERROR_INVALID_VALUE;
    return copy(DPTR(dst), DPTR(src), ByteCount, dst_dev, src_dev);
}

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n) { return cuMemcpyHtoD_v2(d, s, n); }
EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH_v2(d, s, n); }
EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpyDtoD_v2(d, s, n); }
EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpy(d, s, n); }

#define ASYNC(call)                                   \
    do {                                              \
        CUresult rc_ = check_stream(hStream);         \
        return rc_ != CUDA_SUCCESS ? rc_ : (call);    \
    } while (0)

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream hStream) { ASYNC(cuMemcpyHtoD_v2(d, s, n)); }
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpyDtoH_v2(d, s, n)); }
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpyDtoD_v2(d, s, n)); }
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpy(d, s, n)); }
EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream hStream) { ASYNC(cuMemcpyHtoD_v2(d, s, n)); }
EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpyDtoH_v2(d, s, n)); }
EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpyDtoD_v2(d, s, n)); }
EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream hStream) { ASYNC(cuMemcpy(d, s, n)); }

/* ---- sets: N elements of 1, 2 or 4 bytes, in rows of a pitched block for 2D ---- */

static CUresult set2d(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem, size_t width, size_t height) {
    CHECK_INIT();
    if (dst % elem || (height > 1 && (pitch < width * elem || pitch % elem))) return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0) return CUDA_SUCCESS;
    size_t span = (height - 1) * pitch + width * elem;
    pthread_mutex_lock(&cuda_lock);
    unsigned char *base = known((uintptr_t)dst, span);
    if (base) {
        for (size_t row = 0; row < height; row++) {
            unsigned char *p = base + row * pitch;
            if (elem == 1) {
                memset(p, (int)(value & 0xff), width);
            } else {
                for (size_t i = 0; i < width; i++) {
                    if (elem == 2) { uint16_t v = (uint16_t)value; memcpy(p + 2 * i, &v, 2); }
                    else { uint32_t v = value; memcpy(p + 4 * i, &v, 4); }
                }
            }
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return base ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t N) { return set2d(d, 0, uc, 1, N, 1); }
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t N) { return set2d(d, 0, us, 2, N, 1); }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t N) { return set2d(d, 0, ui, 4, N, 1); }
EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char uc, size_t N) { return set2d(d, 0, uc, 1, N, 1); }
EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short us, size_t N) { return set2d(d, 0, us, 2, N, 1); }
EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int ui, size_t N) { return set2d(d, 0, ui, 4, N, 1); }
EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char uc, size_t w, size_t h) { return set2d(d, pitch, uc, 1, w, h); }
EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short us, size_t w, size_t h) { return set2d(d, pitch, us, 2, w, h); }
EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int ui, size_t w, size_t h) { return set2d(d, pitch, ui, 4, w, h); }
EXPORT CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t pitch, unsigned char uc, size_t w, size_t h) { return set2d(d, pitch, uc, 1, w, h); }
EXPORT CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t pitch, unsigned short us, size_t w, size_t h) { return set2d(d, pitch, us, 2, w, h); }
EXPORT CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t pitch, unsigned int ui, size_t w, size_t h) { return set2d(d, pitch, ui, 4, w, h); }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t N, CUstream hStream) { ASYNC(cuMemsetD8_v2(d, uc, N)); }
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t N, CUstream hStream) { ASYNC(cuMemsetD16_v2(d, us, N)); }
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t N, CUstream hStream) { ASYNC(cuMemsetD32_v2(d, ui, N)); }
EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t N, CUstream hStream) { ASYNC(cuMemsetD8_v2(d, uc, N)); }
EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short us, size_t N, CUstream hStream) { ASYNC(cuMemsetD16_v2(d, us, N)); }
EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t N, CUstream hStream) { ASYNC(cuMemsetD32_v2(d, ui, N)); }
