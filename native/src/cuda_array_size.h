/* Bytes a CUDA array takes, by its descriptor: shared by the mock driver (which
 * charges the card) and the shim (which charges the share), so both count the same.
 * 0 for the formats the mock does not model (block-compressed and planar video). */
#ifndef GPUSHARE_CUDA_ARRAY_SIZE_H
#define GPUSHARE_CUDA_ARRAY_SIZE_H

#include <cuda.h>
#include <stdint.h>

static inline unsigned cuda_array_element_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2:
        return 4;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4:
        return 8;
    default:
        return 0;
    }
}

/* Width x Height x Depth elements of NumChannels (1, 2 or 4); Height and Depth 0 mean
 * a lower dimension.  0 when the descriptor is invalid or the product overflows. */
static inline uint64_t cuda_array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels) {
    unsigned elem = cuda_array_element_bytes(f);
    if (!elem || w == 0 || (channels != 1 && channels != 2 && channels != 4) || (d && !h)) return 0;
    unsigned __int128 n = (unsigned __int128)w * (h ? h : 1) * (d ? d : 1) * elem * channels;
    return n > UINT64_MAX ? 0 : (uint64_t)n;
}

#endif
