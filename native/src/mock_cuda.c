/* Mock libcuda.so.1, core: initialisation, devices, contexts and error strings,
 * backed by the mock inventory.  The container view (NVIDIA_VISIBLE_DEVICES) is
 * narrowed by CUDA_VISIBLE_DEVICES as real CUDA does.  Memory lives in cuda_memory.c,
 * cuda_pool.c and cuda_vmm.c, copies in cuda_copy.c and cuda_copy2d.c, streams in
 * cuda_streams.c, cuGetProcAddress in cuda_procaddr.c; every other entry point of
 * cuda.h is a generated stub. */
#include "cuda_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_errors.h"
#include "gpu_models.h"

#define MAX_CONTEXTS 256
#define CTX_MAGIC 0x63747821u

struct CUctx_st {
    unsigned int magic;
    CUdevice device;
    int primary;
    unsigned int flags;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_init_state; /* 0 = not called, 1 = ok, -1 = failed */
static CUresult g_init_result;
inventory_t cuda_view; /* after CUDA_VISIBLE_DEVICES */
#define g_view cuda_view

static struct CUctx_st g_primary[INV_MAX_GPUS];
static int g_primary_refs[INV_MAX_GPUS];
static CUcontext g_created[MAX_CONTEXTS];

static __thread CUcontext t_stack[32];
static __thread int t_depth;

/* ---- initialisation ------------------------------------------------------------ */

/* Apply CUDA_VISIBLE_DEVICES to the container view: indices or (prefixes of) UUIDs;
 * the list ends at the first entry that names no card, as in real CUDA. */
static void apply_cuda_visible(const inventory_t *container, const char *value, inventory_t *out) {
    *out = *container;
    if (!value) return;
    out->gpu_count = 0;
    char list[1024];
    snprintf(list, sizeof list, "%s", value);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        int found = -1;
        if (isdigit((unsigned char)tok[0])) {
            char *end;
            long idx = strtol(tok, &end, 10);
            if (*end == '\0' && idx >= 0 && (unsigned long)idx < container->gpu_count) found = (int)idx;
        } else if (strncmp(tok, "GPU-", 4) == 0 && strlen(tok) > 4) {
            for (unsigned int i = 0; i < container->gpu_count; i++)
                if (strncasecmp(container->gpus[i].uuid, tok, strlen(tok)) == 0) {
                    if (found >= 0) { found = -2; break; } /* ambiguous prefix */
                    found = (int)i;
                }
        }
        if (found < 0) break;
        for (unsigned int j = 0; j < out->gpu_count; j++)
            if (out->gpus[j].physical_index == container->gpus[found].physical_index) found = -1;
        if (found < 0) break;
        out->gpus[out->gpu_count++] = container->gpus[found];
    }
}

EXPORT CUresult cuInit(unsigned int Flags) {
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    if (g_init_state == 0) {
        static inventory_t container;
        char err[INV_ERROR_LEN];
        if (inventory_load_container_view(&container, err, sizeof err) != 0) {
            fprintf(stderr, "gpushare-mock-cuda: %s\n", err);
            g_init_state = -1;
            g_init_result = CUDA_ERROR_NO_DEVICE;
        } else {
            apply_cuda_visible(&container, getenv("CUDA_VISIBLE_DEVICES"), &g_view);
            g_init_state = g_view.gpu_count ? 1 : -1;
            g_init_result = g_view.gpu_count ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
            for (unsigned int i = 0; i < g_view.gpu_count; i++) {
                g_primary[i] = (struct CUctx_st){CTX_MAGIC, (CUdevice)i, 1, 0};
            }
        }
    }
    CUresult rc = g_init_result;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static int ready(void) { return __atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) == 1; }
int cuda_stub_initialised(void) { return ready(); }
int cuda_device_valid(CUdevice dev) { return ready() && dev >= 0 && (unsigned int)dev < g_view.gpu_count; }
#define CHECK_DEVICE(dev)                                           \
    CHECK_INIT();                                                   \
    if ((dev) < 0 || (unsigned int)(dev) >= g_view.gpu_count) return CUDA_ERROR_INVALID_DEVICE

EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    /* Real CUDA answers this before cuInit; the mock needs the inventory for it. */
    if (g_init_state == 0) {
        static inventory_t probe;
        char err[INV_ERROR_LEN];
        if (inventory_load_container_view(&probe, err, sizeof err) != 0) return CUDA_ERROR_NOT_INITIALIZED;
        *driverVersion = probe.cuda_version_int;
        return CUDA_SUCCESS;
    }
    *driverVersion = g_view.cuda_version_int;
    return CUDA_SUCCESS;
}

/* ---- devices ------------------------------------------------------------------- */

EXPORT CUresult cuDeviceGetCount(int *count) {
    CHECK_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = (int)g_view.gpu_count;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    CHECK_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || (unsigned int)ordinal >= g_view.gpu_count) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", g_view.gpus[dev].name); /* truncates like the driver */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)(g_view.gpus[dev].memory_mib * MIB);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    const gpu_model_t *m = gpu_model_for(g_view.gpus[dev].name);
    *major = m->cc_major;
    *minor = m->cc_minor;
    return CUDA_SUCCESS;
}

static void bus_parts(const inv_gpu_t *g, unsigned int *domain, unsigned int *bus, unsigned int *device,
                      unsigned int *fn) {
    *domain = *bus = *device = *fn = 0;
    sscanf(g->pci_bus_id, "%x:%x:%x.%x", domain, bus, device, fn);
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    unsigned int domain, bus, device, fn;
    bus_parts(&g_view.gpus[dev], &domain, &bus, &device, &fn);
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.%X", domain, bus, device, fn);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
    CHECK_INIT();
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    unsigned int d, b, v, f;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &d, &b, &v, &f) != 4) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < g_view.gpu_count; i++) {
        unsigned int d2, b2, v2, f2;
        bus_parts(&g_view.gpus[i], &d2, &b2, &v2, &f2);
        if (d == d2 && b == b2 && v == v2 && f == f2) {
            *dev = (CUdevice)i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    const char *s = g_view.gpus[dev].uuid + 4; /* skip "GPU-" */
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    int n = 0;
    for (; *s && n < 32; s++) {
        if (!isxdigit((unsigned char)*s)) continue;
        int v = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
        uuid->bytes[n / 2] = (char)(uuid->bytes[n / 2] | (n % 2 ? v : v << 4));
        n++;
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return get_uuid(uuid, dev); }
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return get_uuid(uuid, dev); }

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    const inv_gpu_t *g = &g_view.gpus[dev];
    const gpu_model_t *m = gpu_model_for(g->name);
    unsigned int domain, bus, device, fn;
    bus_parts(g, &domain, &bus, &device, &fn);
    int v = 0;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = m->clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = m->sm_count; break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = (int)bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = (int)device; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = (int)domain; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 877000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 4096; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 6291456; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 6; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = m->cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = m->cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 98304; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
    default: v = 0; break; /* features the mock does not model */
    }
    *pi = v;
    return CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------- */

static int ctx_valid(CUcontext c) {
    if (!c || c->magic != CTX_MAGIC) return 0;
    if (c >= &g_primary[0] && c < &g_primary[INV_MAX_GPUS]) return g_primary_refs[c - g_primary] > 0;
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (g_created[i] == c) return 1;
    return 0;
}

static CUcontext current(void) { return t_depth > 0 ? t_stack[t_depth - 1] : NULL; }

CUcontext cuda_current_context(void) { return current(); }

CUresult cuda_current_device(CUdevice *dev) {
    CHECK_INIT();
    CUcontext c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->device;
    return CUDA_SUCCESS;
}

int cuda_context_device(CUcontext ctx) {
    pthread_mutex_lock(&g_lock);
    int dev = ctx_valid(ctx) ? ctx->device : -1;
    pthread_mutex_unlock(&g_lock);
    return dev;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (!g_created[i]) { slot = i; break; }
    CUcontext c = slot >= 0 ? calloc(1, sizeof *c) : NULL;
    if (c && cuda_card_context(dev, +1) != 0) {
        free(c);
        c = NULL;
    }
    if (c) {
        *c = (struct CUctx_st){CTX_MAGIC, dev, 0, flags};
        g_created[slot] = c;
    }
    pthread_mutex_unlock(&g_lock);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    if (t_depth >= (int)(sizeof t_stack / sizeof t_stack[0])) return CUDA_ERROR_OUT_OF_MEMORY;
    t_stack[t_depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) { return cuCtxCreate_v2(pctx, flags, dev); }

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    CHECK_INIT();
    pthread_mutex_lock(&g_lock);
    int found = -1;
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (ctx && g_created[i] == ctx) found = i;
    if (found >= 0) {
        g_created[found] = NULL;
        cuda_card_context(ctx->device, -1);
    }
    pthread_mutex_unlock(&g_lock);
    if (found < 0) return CUDA_ERROR_INVALID_CONTEXT; /* also refuses primary contexts */
    for (int i = 0; i < t_depth; i++)
        if (t_stack[i] == ctx) {
            memmove(&t_stack[i], &t_stack[i + 1], (size_t)(t_depth - i - 1) * sizeof t_stack[0]);
            t_depth--;
            i--;
        }
    ctx->magic = 0;
    free(ctx);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    CHECK_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    CHECK_INIT();
    if (!ctx) {
        if (t_depth > 0) t_depth--;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&g_lock);
    int ok = ctx_valid(ctx);
    pthread_mutex_unlock(&g_lock);
    if (!ok) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth == 0) t_depth = 1;
    t_stack[t_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    CHECK_INIT();
    pthread_mutex_lock(&g_lock);
    int ok = ctx_valid(ctx);
    pthread_mutex_unlock(&g_lock);
    if (!ok) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth >= (int)(sizeof t_stack / sizeof t_stack[0])) return CUDA_ERROR_OUT_OF_MEMORY;
    t_stack[t_depth++] = ctx;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    CHECK_INIT();
    if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = t_stack[--t_depth];
    if (pctx) *pctx = c;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    CHECK_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
    CHECK_INIT();
    return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    CHECK_DEVICE(dev);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    CUresult rc = CUDA_SUCCESS;
    if (g_primary_refs[dev] == 0) {
        if (cuda_card_context(dev, +1) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        g_primary_refs[dev]++;
        *pctx = &g_primary[dev];
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    CHECK_DEVICE(dev);
    pthread_mutex_lock(&g_lock);
    CUresult rc = CUDA_SUCCESS;
    if (g_primary_refs[dev] == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (--g_primary_refs[dev] == 0)
        cuda_card_context(dev, -1);
    pthread_mutex_unlock(&g_lock);
    return rc;
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
    CHECK_DEVICE(dev);
    if (flags & ~(unsigned int)(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX)) return CUDA_ERROR_INVALID_VALUE;
    g_primary[dev].flags = flags;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) { return cuDevicePrimaryCtxSetFlags_v2(dev, flags); }

EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
    CHECK_INIT();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    if (ctx && cuda_context_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx && !current()) return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags) {
    CHECK_INIT();
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    CHECK_DEVICE(dev);
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    *flags = g_primary[dev].flags;
    *active = g_primary_refs[dev] > 0;
    return CUDA_SUCCESS;
}

/* ---- errors -------------------------------------------------------------------- */

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < CUDA_ERROR_TABLE_LEN; i++)
        if (CUDA_ERROR_TABLE[i].code == (int)error) {
            *pStr = CUDA_ERROR_TABLE[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < CUDA_ERROR_TABLE_LEN; i++)
        if (CUDA_ERROR_TABLE[i].code == (int)error) {
            *pStr = CUDA_ERROR_TABLE[i].description;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

