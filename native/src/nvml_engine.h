/* The mock NVML's one engine: the inventory's container view, device handles and the
 * init reference count.  The exported functions (mock_nvml.c, nvml_*.c and the
 * generated stubs) are thin ABI wrappers over it.  Compiled against the real nvml.h. */
#ifndef GPUSHARE_NVML_ENGINE_H
#define GPUSHARE_NVML_ENGINE_H

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include "inventory.h"

#define EXPORT __attribute__((visibility("default")))
#define NVML_HIDDEN __attribute__((visibility("hidden")))

struct nvmlDevice_st {
    unsigned int index; /* container index */
};

/* nvmlInit*: load the inventory on the first reference. */
NVML_HIDDEN nvmlReturn_t nvml_engine_init(void);
/* nvmlShutdown: drop a reference (UNINITIALIZED when there is none). */
NVML_HIDDEN nvmlReturn_t nvml_engine_shutdown(void);

/* The inventory file's container view as it reads now (events follow it at run time);
 * -1 when it cannot be read. */
NVML_HIDDEN int nvml_engine_read_now(inventory_t *now);

NVML_HIDDEN int nvml_initialised(void);
/* The container view (valid while initialised). */
NVML_HIDDEN const inventory_t *nvml_view(void);
/* The card behind a handle; NULL when it is not one of ours. */
NVML_HIDDEN const inv_gpu_t *nvml_gpu(nvmlDevice_t device);
/* The handle of container index i (i < count). */
NVML_HIDDEN nvmlDevice_t nvml_handle(unsigned int index);

/* Copy a string the NVML way: INVALID_ARGUMENT for NULL, INSUFFICIENT_SIZE when short. */
NVML_HIDDEN nvmlReturn_t nvml_copy_string(char *dst, unsigned int length, const char *src);

/* Device used bytes from the node's process table (what processes hold). */
NVML_HIDDEN unsigned long long nvml_used_bytes(const inv_gpu_t *gpu);

/* Start of a query that a lost card still answers (its PCI info): init, then the handle. */
#define CHECK_HANDLE(dev, gpu)                           \
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED; \
    const inv_gpu_t *gpu = nvml_gpu(dev);                \
    if (!gpu) return NVML_ERROR_INVALID_ARGUMENT

/* Start of every other device query: a card that fell off the bus answers nothing. */
#define CHECK_DEVICE(dev, gpu) \
    CHECK_HANDLE(dev, gpu);    \
    if (gpu->lost) return NVML_ERROR_GPU_IS_LOST

/* ... then the output pointers. */
#define CHECK_OUT(...)                                                       \
    do {                                                                     \
        const void *outs_[] = {__VA_ARGS__};                                 \
        for (unsigned i_ = 0; i_ < sizeof outs_ / sizeof outs_[0]; i_++)     \
            if (!outs_[i_]) return NVML_ERROR_INVALID_ARGUMENT;              \
    } while (0)

#endif
