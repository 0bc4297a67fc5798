/* Mock NVML running processes: the compute processes come from the node's process
 * table that the mock CUDA keeps (gpu_process_table.h), per physical card; nothing
 * draws graphics and no MPS server runs, so those lists are empty. */
#include "nvml_engine.h"

#include "gpu_process_table.h"

#define MAX_PROCS 256

/* Fill infos (stride bytes apart, v1 or v2 layout) the NVML way: the count on
 * INSUFFICIENT_SIZE when *infoCount is too small (infos may then be NULL). */
static nvmlReturn_t list(nvmlDevice_t device, unsigned int *infoCount, void *infos, size_t stride, int v2,
                         int compute) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(infoCount);
    static __thread struct gpt_entry procs[MAX_PROCS];
    int n = compute ? gpt_list(gpu->physical_index, procs, MAX_PROCS) : 0;
    if (n < 0) n = 0;
    if (n > MAX_PROCS) n = MAX_PROCS;
    if ((unsigned int)n > *infoCount) {
        *infoCount = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)((char *)infos + (size_t)i * stride);
        p->pid = procs[i].pid;
        p->usedGpuMemory = procs[i].used_bytes;
        if (v2) p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu; /* no MIG */
    }
    *infoCount = (unsigned int)n;
    return NVML_SUCCESS;
}

#define V1 sizeof(nvmlProcessInfo_v1_t), 0
#define V2 sizeof(nvmlProcessInfo_v2_t), 1

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    return list(d, n, p, V2, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    return list(d, n, p, V2, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return list(d, n, p, V1, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    return list(d, n, p, V2, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    return list(d, n, p, V2, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return list(d, n, p, V1, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    return list(d, n, p, V2, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                               nvmlProcessInfo_v2_t *p) {
    return list(d, n, p, V2, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return list(d, n, p, V1, 0);
}
