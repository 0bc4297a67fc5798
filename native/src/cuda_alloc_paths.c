/* Device-allocation paths of the driver API (interface: cuda_alloc_paths.h).  The
 * current context must be set on st->dev's card before alloc is called. */
#include "cuda_alloc_paths.h"

#include <dlfcn.h>
#include <string.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
typedef CUresult (*managed_fn)(CUdeviceptr *, size_t, unsigned int);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);
typedef CUresult (*sync_fn)(CUstream);
typedef CUresult (*pool_create_fn)(CUmemoryPool *, const CUmemPoolProps *);
typedef CUresult (*pool_destroy_fn)(CUmemoryPool);
typedef CUresult (*from_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*granularity_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

/* Resolve names[i] into st->fn[i]; on a missing one name it in *step. */
static CUresult resolve(path_state_t *st, void *lib, const char *const *names, int n, const char **step) {
    for (int i = 0; i < n; i++) {
        st->fn[i] = dlsym(lib, names[i]);
        if (!st->fn[i]) {
            *step = names[i];
            return CUDA_ERROR_NOT_FOUND;
        }
    }
    return CUDA_SUCCESS;
}

#define FN(i, type) ((type)st->fn[i])
#define CALL(name, expr)                          \
    do {                                          \
        CUresult rc_ = (expr);                    \
        if (rc_ != CUDA_SUCCESS) {                \
            *step = (name);                       \
            return rc_;                           \
        }                                         \
    } while (0)

static void close_nothing(path_state_t *st) { (void)st; }

static CUresult release_plain(path_state_t *st, path_block_t *b, const char **step) {
    CALL("cuMemFree_v2", FN(0, free_fn)(b->ptr));
    return CUDA_SUCCESS;
}

/* alloc: cuMemAlloc_v2 / cuMemFree_v2 */
static CUresult open_alloc(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemFree_v2", "cuMemAlloc_v2"};
    st->dev = dev;
    return resolve(st, lib, names, 2, step);
}
static CUresult alloc_alloc(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    CALL("cuMemAlloc_v2", FN(1, alloc_fn)(&b->ptr, bytes));
    return CUDA_SUCCESS;
}

/* pitch: rows of 1 MiB (4-byte elements), so the pitch adds nothing */
static CUresult open_pitch(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemFree_v2", "cuMemAllocPitch_v2"};
    st->dev = dev;
    return resolve(st, lib, names, 2, step);
}
static CUresult alloc_pitch(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    size_t row = 1 << 20, pitch = 0, rows = (bytes + row - 1) / row;
    CALL("cuMemAllocPitch_v2", FN(1, pitch_fn)(&b->ptr, &pitch, bytes < row ? bytes : row, bytes < row ? 1 : rows, 4));
    return CUDA_SUCCESS;
}

/* managed: cuMemAllocManaged (attached globally) */
static CUresult open_managed(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemFree_v2", "cuMemAllocManaged"};
    st->dev = dev;
    return resolve(st, lib, names, 2, step);
}
static CUresult alloc_managed(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    CALL("cuMemAllocManaged", FN(1, managed_fn)(&b->ptr, bytes, CU_MEM_ATTACH_GLOBAL));
    return CUDA_SUCCESS;
}

/* async: the device's current pool, on the legacy default stream */
static CUresult open_async(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemAllocAsync", "cuMemFreeAsync", "cuStreamSynchronize"};
    st->dev = dev;
    return resolve(st, lib, names, 3, step);
}
static CUresult alloc_async(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    CALL("cuMemAllocAsync", FN(0, alloc_async_fn)(&b->ptr, bytes, NULL));
    CALL("cuStreamSynchronize", FN(2, sync_fn)(NULL));
    return CUDA_SUCCESS;
}
static CUresult release_async(path_state_t *st, path_block_t *b, const char **step) {
    CALL("cuMemFreeAsync", FN(1, free_async_fn)(b->ptr, NULL));
    CALL("cuStreamSynchronize", FN(2, sync_fn)(NULL));
    return CUDA_SUCCESS;
}

/* pool: a pool of its own on the device */
static CUresult open_pool(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuStreamSynchronize",
                                        "cuMemPoolCreate", "cuMemPoolDestroy"};
    st->dev = dev;
    CUresult rc = resolve(st, lib, names, 5, step);
    if (rc != CUDA_SUCCESS) return rc;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CALL("cuMemPoolCreate", FN(3, pool_create_fn)(&st->pool, &props));
    return CUDA_SUCCESS;
}
static CUresult alloc_pool(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    CALL("cuMemAllocFromPoolAsync", FN(0, from_pool_fn)(&b->ptr, bytes, st->pool, NULL));
    CALL("cuStreamSynchronize", FN(2, sync_fn)(NULL));
    return CUDA_SUCCESS;
}
static void close_pool(path_state_t *st) {
    if (st->pool) FN(4, pool_destroy_fn)(st->pool);
    st->pool = NULL;
}

/* vmm: reserve, create, map, make accessible; and back */
static void vmm_prop(CUmemAllocationProp *prop, CUdevice dev) {
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
}
static CUresult open_vmm(path_state_t *st, void *lib, CUdevice dev, const char **step) {
    static const char *const names[] = {"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree",
                                        "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess"};
    st->dev = dev;
    CUresult rc = resolve(st, lib, names, 8, step);
    if (rc != CUDA_SUCCESS) return rc;
    CUmemAllocationProp prop;
    vmm_prop(&prop, dev);
    CALL("cuMemGetAllocationGranularity", FN(0, granularity_fn)(&st->granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return CUDA_SUCCESS;
}
static CUresult alloc_vmm(path_state_t *st, path_block_t *b, size_t bytes, const char **step) {
    CUmemAllocationProp prop;
    vmm_prop(&prop, st->dev);
    b->size = (bytes + st->granularity - 1) / st->granularity * st->granularity;
    CALL("cuMemAddressReserve", FN(1, reserve_fn)(&b->ptr, b->size, 0, 0, 0));
    CUresult rc = FN(3, create_fn)(&b->phys, b->size, &prop, 0);
    if (rc != CUDA_SUCCESS) {
        FN(2, addr_free_fn)(b->ptr, b->size);
        *step = "cuMemCreate";
        return rc;
    }
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, st->dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((rc = FN(5, map_fn)(b->ptr, b->size, 0, b->phys, 0)) != CUDA_SUCCESS) *step = "cuMemMap";
    else if ((rc = FN(7, access_fn)(b->ptr, b->size, &access, 1)) != CUDA_SUCCESS) *step = "cuMemSetAccess";
    if (rc != CUDA_SUCCESS) {
        FN(6, unmap_fn)(b->ptr, b->size);
        FN(4, release_fn)(b->phys);
        FN(2, addr_free_fn)(b->ptr, b->size);
    }
    return rc;
}
static CUresult release_vmm(path_state_t *st, path_block_t *b, const char **step) {
    CALL("cuMemUnmap", FN(6, unmap_fn)(b->ptr, b->size));
    CALL("cuMemRelease", FN(4, release_fn)(b->phys));
    CALL("cuMemAddressFree", FN(2, addr_free_fn)(b->ptr, b->size));
    return CUDA_SUCCESS;
}

static const alloc_path_t PATHS[] = {
    {"alloc", "cuMemAlloc_v2", open_alloc, alloc_alloc, release_plain, close_nothing},
    {"pitch", "cuMemAllocPitch_v2", open_pitch, alloc_pitch, release_plain, close_nothing},
    {"managed", "cuMemAllocManaged", open_managed, alloc_managed, release_plain, close_nothing},
    {"async", "cuMemAllocAsync", open_async, alloc_async, release_async, close_nothing},
    {"pool", "cuMemAllocFromPoolAsync", open_pool, alloc_pool, release_async, close_pool},
    {"vmm", "cuMemCreate", open_vmm, alloc_vmm, release_vmm, close_nothing},
};

const alloc_path_t *alloc_path_named(const char *name) {
    for (size_t i = 0; i < sizeof PATHS / sizeof PATHS[0]; i++)
        if (strcmp(PATHS[i].name, name) == 0) return &PATHS[i];
    return NULL;
}
