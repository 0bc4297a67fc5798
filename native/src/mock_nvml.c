/* Mock libnvidia-ml.so.1: the NVML subset that nvidia-ml-py, the mock nvidia-smi and
 * the device plugin use, backed by the mock inventory (GPUSHARE_MOCK_INVENTORY) and
 * restricted to NVIDIA_VISIBLE_DEVICES the way a container sees its mounted cards.
 * Compiled against the real nvml.h so every signature and struct matches the ABI. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpu_models.h"
#include "inventory.h"

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    unsigned int index; /* container index */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_refcount;
static inventory_t g_view;
static struct nvmlDevice_st g_devices[INV_MAX_GPUS];

static nvmlReturn_t load_locked(void) {
    char err[INV_ERROR_LEN];
    if (inventory_load_container_view(&g_view, err, sizeof err) != 0) {
        fprintf(stderr, "gpushare-mock-nvml: %s\n", err);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    for (unsigned int i = 0; i < g_view.gpu_count; i++) g_devices[i].index = i;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_refcount == 0) rc = load_locked();
    if (rc == NVML_SUCCESS) g_refcount++;
    pthread_mutex_unlock(&g_lock);
    return rc;
}
EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_refcount == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        g_refcount--;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Ran out of critical resources, other than memory";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not Ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

/* ---- helpers ------------------------------------------------------------------ */

static int initialised(void) { return __atomic_load_n(&g_refcount, __ATOMIC_ACQUIRE) > 0; }

/* Resolve a handle; NULL when it is not one of ours. */
static const inv_gpu_t *gpu_of(nvmlDevice_t device) {
    if (device < &g_devices[0] || device >= &g_devices[g_view.gpu_count]) return NULL;
    if (((const char *)device - (const char *)g_devices) % sizeof g_devices[0]) return NULL;
    return &g_view.gpus[device->index];
}

#define CHECK_DEVICE(dev, gpu)                                  \
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;        \
    const inv_gpu_t *gpu = gpu_of(dev);                         \
    if (!gpu) return NVML_ERROR_INVALID_ARGUMENT

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ---- system queries ----------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, g_view.driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    int major = 0;
    sscanf(g_view.cuda_version, "%d", &major);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%s", major, g_view.driver_version);
    return copy_string(version, length, buf);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    /* Real NVML answers this one without nvmlInit; the mock needs the inventory. */
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    *cudaDriverVersion = g_view.cuda_version_int;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- enumeration -------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = g_view.gpu_count;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= g_view.gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devices[index];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < g_view.gpu_count; i++)
        if (strcasecmp(g_view.gpus[i].uuid, uuid) == 0) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

/* Compare bus ids the way NVML does: the domain may be written with 4 or 8 digits. */
static int same_bus_id(const char *ours, const char *theirs) {
    const char *a = strchr(ours, ':'), *b = strchr(theirs, ':');
    if (!a || !b) return 0;
    unsigned int da, db;
    if (sscanf(ours, "%x", &da) != 1 || sscanf(theirs, "%x", &db) != 1 || da != db) return 0;
    return strcasecmp(a, b) == 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    if (!initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!pciBusId || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < g_view.gpu_count; i++)
        if (same_bus_id(g_view.gpus[i].pci_bus_id, pciBusId)) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* ---- identity ----------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    return copy_string(name, length, gpu->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    return copy_string(uuid, length, gpu->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    char buf[32];
    snprintf(buf, sizeof buf, "%013u", 1320000000u + gpu->physical_index);
    return copy_string(serial, length, buf);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    CHECK_DEVICE(device, gpu);
    if (!minorNumber) return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = gpu->physical_index; /* /dev/nvidiaN of the physical card */
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
    CHECK_DEVICE(device, gpu);
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = strstr(gpu->name, "Tesla") ? NVML_BRAND_TESLA : NVML_BRAND_NVIDIA;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    CHECK_DEVICE(device, gpu);
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    const gpu_model_t *m = gpu_model_for(gpu->name);
    *major = m->cc_major;
    *minor = m->cc_minor;
    return NVML_SUCCESS;
}

/* PCI info: v1/v2 callers pass the older, shorter structs (busId[16] first, then
 * domain..pciSubSystemId; v2 adds 16 reserved bytes); v3 is today's nvmlPciInfo_t. */
static void fill_pci(const inv_gpu_t *gpu, nvmlPciInfo_t *out) {
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(gpu->pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    memset(out, 0, sizeof *out);
    snprintf(out->busIdLegacy, sizeof out->busIdLegacy, "%04X:%02X:%02X.%X", domain, bus, dev, fn);
    out->domain = domain;
    out->bus = bus;
    out->device = dev;
    out->pciDeviceId = gpu_model_for(gpu->name)->pci_device_id;
    out->pciSubSystemId = 0x124910DE;
    snprintf(out->busId, sizeof out->busId, "%s", gpu->pci_bus_id);
}

#define PCI_V1_SIZE (offsetof(nvmlPciInfo_t, busId))
#define PCI_V2_SIZE (offsetof(nvmlPciInfo_t, busId) + 16)

static nvmlReturn_t get_pci(nvmlDevice_t device, nvmlPciInfo_t *pci, size_t size) {
    CHECK_DEVICE(device, gpu);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlPciInfo_t full;
    fill_pci(gpu, &full);
    memcpy(pci, &full, size);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return get_pci(device, pci, sizeof *pci);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return get_pci(device, pci, PCI_V2_SIZE);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return get_pci(device, pci, PCI_V1_SIZE);
}

/* ---- memory ------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    CHECK_DEVICE(device, gpu);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = gpu->memory_mib << 20;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    CHECK_DEVICE(device, gpu);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = gpu->memory_mib << 20;
    memory->reserved = 0;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!bar1Memory) return NVML_ERROR_INVALID_ARGUMENT;
    bar1Memory->bar1Total = 32ULL << 30;
    bar1Memory->bar1Used = 2ULL << 20;
    bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
    return NVML_SUCCESS;
}

/* ---- processes: the mock driver has no cross-process view, so the list is empty --- */

static nvmlReturn_t no_processes(nvmlDevice_t device, unsigned int *infoCount) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!infoCount) return NVML_ERROR_INVALID_ARGUMENT;
    *infoCount = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    (void)p;
    return no_processes(d, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    (void)p;
    return no_processes(d, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    (void)p;
    return no_processes(d, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    (void)p;
    return no_processes(d, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    (void)p;
    return no_processes(d, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    (void)p;
    return no_processes(d, n);
}

/* ---- state shown by nvidia-smi ------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!isActive) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display) {
    return nvmlDeviceGetDisplayActive(device, display);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp) {
    CHECK_DEVICE(device, gpu);
    if (!temp || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 34 + gpu->physical_index % 5;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!speed) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED; /* passively cooled data-centre cards */
}
EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!pState) return NVML_ERROR_INVALID_ARGUMENT;
    *pState = NVML_PSTATE_0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    CHECK_DEVICE(device, gpu);
    if (!power) return NVML_ERROR_INVALID_ARGUMENT;
    *power = gpu_model_for(gpu->name)->power_limit_mw / 6;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) {
    CHECK_DEVICE(device, gpu);
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = gpu_model_for(gpu->name)->power_limit_mw;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    return nvmlDeviceGetPowerManagementLimit(device, limit);
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = 0;
    utilization->memory = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = NVML_COMPUTEMODE_DEFAULT;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    if (!eccCounts || errorType >= NVML_MEMORY_ERROR_TYPE_COUNT || counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eccCounts = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    CHECK_DEVICE(device, gpu);
    if (!currentMode || !pendingMode) return NVML_ERROR_INVALID_ARGUMENT;
    const gpu_model_t *m = gpu_model_for(gpu->name);
    if (m->cc_major < 8 || strstr(gpu->name, "A10") || strstr(gpu->name, "L4")) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}
