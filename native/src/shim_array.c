/* The share on CUDA arrays (cuArrayCreate, cuArray3DCreate): their element bytes
 * (cuda_array_size.h) are reserved on the current context's card before the driver
 * is asked, and given back by cuArrayDestroy.  Formats of unknown size (block
 * compressed, planar video) are charged 16 bytes an element, more than any of them
 * takes, so the share errs on the safe side. */
#include "shim_cuda.h"

#include <pthread.h>
#include <stdlib.h>

#include "cuda_array_size.h"

typedef struct array_rec {
    CUarray array;
    int card;
    uint64_t bytes;
    struct array_rec *next;
} array_rec_t;

static array_rec_t *g_arrays;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
    CUresult (*create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*create3d)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    CUresult (*destroy)(CUarray);
} R;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void) {
    R.create = (__typeof__(R.create))shim_real_cuda("cuArrayCreate_v2");
    R.create3d = (__typeof__(R.create3d))shim_real_cuda("cuArray3DCreate_v2");
    R.destroy = (__typeof__(R.destroy))shim_real_cuda("cuArrayDestroy");
}

#define PREAMBLE(real, forward_call)                  \
    shim_mode_t m_ = shim_cuda_mode();                \
    pthread_once(&g_once, load);                      \
    if (m_ == SHIM_BROKEN) return shim_refuse_cuda(); \
    if (!(real)) return CUDA_ERROR_NOT_FOUND;         \
    if (m_ != SHIM_LIMITED) return forward_call

static uint64_t charge_of(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels) {
    uint64_t bytes = cuda_array_bytes(w, h, d, f, channels);
    if (bytes || cuda_array_element_bytes(f)) return bytes;
    unsigned __int128 n = (unsigned __int128)w * (h ? h : 1) * (d ? d : 1) * 16;
    return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

/* Reserve, create through call, record; the driver's own error when it refuses. */
#define CREATE(pHandle, bytes, call)                                                           \
    do {                                                                                       \
        int card_ = shim_current_card();                                                       \
        uint64_t limit_ = shim_card_limit(card_);                                              \
        if (!limit_ || !(bytes) || !(pHandle)) return (call);                                  \
        array_rec_t *r_ = malloc(sizeof *r_);                                                  \
        if (!r_) return CUDA_ERROR_OUT_OF_MEMORY;                                              \
        if (usage_reserve(card_, (bytes), limit_) != 0 &&                                      \
            (!shim_pools_settle() || usage_reserve(card_, (bytes), limit_) != 0)) {            \
            free(r_);                                                                          \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                   \
        }                                                                                      \
        CUresult rc_ = (call);                                                                 \
        if (rc_ != CUDA_SUCCESS) {                                                             \
            usage_release(card_, (bytes));                                                     \
            free(r_);                                                                          \
            return rc_;                                                                        \
        }                                                                                      \
        pthread_mutex_lock(&g_lock);                                                           \
        *r_ = (array_rec_t){*(pHandle), card_, (bytes), g_arrays};                             \
        g_arrays = r_;                                                                         \
        pthread_mutex_unlock(&g_lock);                                                         \
        return rc_;                                                                            \
    } while (0)

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
    PREAMBLE(R.create, R.create(pHandle, pAllocateArray));
    const CUDA_ARRAY_DESCRIPTOR *d = pAllocateArray;
    uint64_t bytes = d ? charge_of(d->Width, d->Height, 0, d->Format, d->NumChannels) : 0;
    CREATE(pHandle, bytes, R.create(pHandle, pAllocateArray));
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
    PREAMBLE(R.create3d, R.create3d(pHandle, pAllocateArray));
    const CUDA_ARRAY3D_DESCRIPTOR *d = pAllocateArray;
    uint64_t bytes = d ? charge_of(d->Width, d->Height, d->Depth, d->Format, d->NumChannels) : 0;
    CREATE(pHandle, bytes, R.create3d(pHandle, pAllocateArray));
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
    PREAMBLE(R.destroy, R.destroy(hArray));
    pthread_mutex_lock(&g_lock);
    CUresult rc = R.destroy(hArray);
    if (rc == CUDA_SUCCESS)
        for (array_rec_t **p = &g_arrays; *p; p = &(*p)->next)
            if ((*p)->array == hArray) {
                array_rec_t *r = *p;
                *p = r->next;
                usage_release(r->card, r->bytes);
                free(r);
                break;
            }
    pthread_mutex_unlock(&g_lock);
    return rc;
}
