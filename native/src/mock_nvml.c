/* Mock libnvidia-ml.so.1, the ABI layer: init, errors, system queries, enumeration,
 * identity, PCI and memory.  Device state lives in nvml_device.c, events in
 * nvml_events.c, processes in nvml_procs.c; every other function of nvml.h is a
 * generated stub (native/gen-nvml-stubs.py).  Values come from the inventory
 * (GPUSHARE_MOCK_INVENTORY) and each card's model profile, restricted to
 * NVIDIA_VISIBLE_DEVICES the way a container sees its mounted cards. */
#include "nvml_engine.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvml_engine_init();
}
EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvml_engine_init(); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvml_engine_init(); }
EXPORT nvmlReturn_t nvmlShutdown(void) { return nvml_engine_shutdown(); }

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

/* ---- system queries ----------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    return nvml_copy_string(version, length, nvml_view()->driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    int major = 0;
    sscanf(nvml_view()->cuda_version, "%d", &major);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%s", major, nvml_view()->driver_version);
    return nvml_copy_string(version, length, buf);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    /* Real NVML answers this one without nvmlInit; the mock needs the inventory. */
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    *cudaDriverVersion = nvml_view()->cuda_version_int;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* The name a process runs as (nvidia-smi's "Process name"): argv[0] from /proc. */
EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!name || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    char path[64], buf[256] = "";
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    FILE *f = fopen(path, "re");
    if (!f) return NVML_ERROR_NOT_FOUND;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!buf[0]) return NVML_ERROR_NOT_FOUND;
    snprintf(name, length, "%s", buf); /* the real library truncates to length */
    return NVML_SUCCESS;
}

/* Not an S-class system: no units. */
EXPORT nvmlReturn_t nvmlUnitGetCount(unsigned int *unitCount) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!unitCount) return NVML_ERROR_INVALID_ARGUMENT;
    *unitCount = 0;
    return NVML_SUCCESS;
}

/* ---- enumeration -------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = nvml_view()->gpu_count;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

/* A lost card is counted, as by a real driver, but gives no handle.  The handle is
 * still written (NVML leaves it unspecified on error) and answers only its PCI info:
 * the mock nvidia-smi names the card by it, as the real tool asks the driver. */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= nvml_view()->gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = nvml_handle(index);
    return nvml_view()->gpus[index].lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static void serial_of(const inv_gpu_t *gpu, char *buf, size_t len) {
    snprintf(buf, len, "%013u", 1320000000u + gpu->physical_index);
}

/* Find a card by a string key; NOT_FOUND when no card has it, GPU_IS_LOST for a lost one. */
static nvmlReturn_t find_device(const char *key, nvmlDevice_t *device, int (*same)(const inv_gpu_t *, const char *)) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!key || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < nvml_view()->gpu_count; i++)
        if (same(&nvml_view()->gpus[i], key)) {
            if (nvml_view()->gpus[i].lost) return NVML_ERROR_GPU_IS_LOST;
            *device = nvml_handle(i);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

static int same_uuid(const inv_gpu_t *g, const char *uuid) { return strcasecmp(g->uuid, uuid) == 0; }

static int same_serial(const inv_gpu_t *g, const char *serial) {
    char buf[32];
    serial_of(g, buf, sizeof buf);
    return strcmp(buf, serial) == 0;
}

/* Compare bus ids the way NVML does: the domain may be written with 4 or 8 digits. */
static int same_bus_id(const inv_gpu_t *g, const char *theirs) {
    const char *a = strchr(g->pci_bus_id, ':'), *b = strchr(theirs, ':');
    if (!a || !b) return 0;
    unsigned int da, db;
    if (sscanf(g->pci_bus_id, "%x", &da) != 1 || sscanf(theirs, "%x", &db) != 1 || da != db) return 0;
    return strcasecmp(a, b) == 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    return find_device(uuid, device, same_uuid);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device) {
    return find_device(serial, device, same_serial);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    return find_device(pciBusId, device, same_bus_id);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* ---- identity ----------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    return nvml_copy_string(name, length, gpu->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    return nvml_copy_string(uuid, length, gpu->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    CHECK_DEVICE(device, gpu);
    char buf[32];
    serial_of(gpu, buf, sizeof buf);
    return nvml_copy_string(serial, length, buf);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(index);
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(minorNumber);
    *minorNumber = gpu->physical_index; /* /dev/nvidiaN of the physical card */
    return NVML_SUCCESS;
}

/* One board per card: the id is the card's PCI location. */
EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int *boardId) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(boardId);
    unsigned int domain = 0, bus = 0, dev = 0;
    sscanf(gpu->pci_bus_id, "%x:%x:%x", &domain, &bus, &dev);
    *boardId = (domain << 16) | (bus << 8) | (dev << 3);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(type);
    static const struct { const char *word; nvmlBrandType_t brand; } BRANDS[] = {
        {"tesla", NVML_BRAND_TESLA},     {"nvidia", NVML_BRAND_NVIDIA},         {"geforce", NVML_BRAND_GEFORCE},
        {"quadro", NVML_BRAND_QUADRO},   {"titan", NVML_BRAND_TITAN},           {"nvidia_rtx", NVML_BRAND_NVIDIA_RTX},
        {"quadro_rtx", NVML_BRAND_QUADRO_RTX},
    };
    *type = NVML_BRAND_UNKNOWN;
    for (size_t i = 0; i < sizeof BRANDS / sizeof BRANDS[0]; i++)
        if (strcmp(gpu->model.brand, BRANDS[i].word) == 0) *type = BRANDS[i].brand;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(arch);
    static const char *const ARCH[] = {"kepler", "maxwell", "pascal", "volta", "turing",
                                       "ampere", "ada",     "hopper", "blackwell"};
    *arch = NVML_DEVICE_ARCH_UNKNOWN;
    for (unsigned int i = 0; i < sizeof ARCH / sizeof ARCH[0]; i++)
        if (strcmp(gpu->model.architecture, ARCH[i]) == 0) *arch = NVML_DEVICE_ARCH_KEPLER + i;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(major, minor);
    *major = gpu->model.cc_major;
    *minor = gpu->model.cc_minor;
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
    out->pciDeviceId = gpu->model.pci_device_id;
    out->pciSubSystemId = gpu->model.pci_subsystem_id;
    snprintf(out->busId, sizeof out->busId, "%s", gpu->pci_bus_id);
}

#define PCI_V1_SIZE (offsetof(nvmlPciInfo_t, busId))
#define PCI_V2_SIZE (offsetof(nvmlPciInfo_t, busId) + 16)

static nvmlReturn_t get_pci(nvmlDevice_t device, nvmlPciInfo_t *pci, size_t size) {
    CHECK_HANDLE(device, gpu); /* known from the bus scan, so a lost card keeps it */
    CHECK_OUT(pci);
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

/* ---- memory: used is what the node's process table says processes hold --------- */

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(memory);
    memory->total = gpu->memory_mib << 20;
    memory->used = nvml_used_bytes(gpu);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(memory);
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = gpu->memory_mib << 20;
    memory->reserved = 0;
    memory->used = nvml_used_bytes(gpu);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(bar1Memory);
    bar1Memory->bar1Total = (unsigned long long)gpu->model.bar1_mib << 20;
    bar1Memory->bar1Used = bar1Memory->bar1Total < (2ULL << 20) ? bar1Memory->bar1Total : 2ULL << 20;
    bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device, unsigned int *busWidth) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(busWidth);
    *busWidth = gpu->model.memory_bus_width;
    return NVML_SUCCESS;
}
