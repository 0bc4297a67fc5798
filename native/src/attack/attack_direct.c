/* libgpushare-attack-direct.so: a library linked against libcuda.so.1 that hands out
 * the entry points its own references bind to.  Opened with RTLD_DEEPBIND, or into a
 * new link-map namespace with dlmopen, those references resolve to the driver itself
 * unless the isolation holds the loader (gpushare-attack loader deepbind|dlmopen). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <string.h>

#define ENTRY(name) {#name, (void *)&name}

__attribute__((visibility("default"))) void *attack_direct(const char *name) {
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        ENTRY(cuInit),          ENTRY(cuDeviceGet),        ENTRY(cuDeviceGetCount), ENTRY(cuDevicePrimaryCtxRetain),
        ENTRY(cuCtxSetCurrent), ENTRY(cuMemAlloc_v2),      ENTRY(cuMemFree_v2),     ENTRY(cuMemGetInfo_v2),
        ENTRY(cuGetErrorName),  ENTRY(cuStreamCreate),     ENTRY(cuMemAllocAsync),  ENTRY(cuStreamSynchronize),
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].fn;
    return NULL;
}
