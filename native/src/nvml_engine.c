/* The mock NVML's engine (see nvml_engine.h). */
#include "nvml_engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_process_table.h"

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

/* A card falls off the bus for every process at once, as on a real node: a later init
 * under a held reference (an event thread keeps one) takes the file's lost flags,
 * while handles and the card list stay as the first init set them. */
static void refresh_lost_locked(void) {
    char err[INV_ERROR_LEN];
    inventory_t *now = malloc(sizeof *now);
    if (!now) return;
    if (inventory_load_container_view(now, err, sizeof err) == 0 && now->gpu_count == g_view.gpu_count) {
        int same = 1;
        for (unsigned int i = 0; i < g_view.gpu_count && same; i++)
            same = strcmp(now->gpus[i].uuid, g_view.gpus[i].uuid) == 0;
        for (unsigned int i = 0; i < g_view.gpu_count && same; i++)
            __atomic_store_n(&g_view.gpus[i].lost, now->gpus[i].lost, __ATOMIC_RELAXED);
    }
    free(now);
}

nvmlReturn_t nvml_engine_init(void) {
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    /* Read the file again on every first reference: a long-lived process that inits
     * per poll (the device plugin) sees a card fall off the bus, or come back. */
    if (g_refcount == 0) rc = load_locked();
    else refresh_lost_locked();
    if (rc == NVML_SUCCESS) __atomic_add_fetch(&g_refcount, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

nvmlReturn_t nvml_engine_shutdown(void) {
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_refcount == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        __atomic_sub_fetch(&g_refcount, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int nvml_engine_read_now(inventory_t *now) {
    char err[INV_ERROR_LEN];
    pthread_mutex_lock(&g_lock); /* the parser's scratch space is shared */
    int rc = inventory_load_container_view(now, err, sizeof err);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int nvml_initialised(void) { return __atomic_load_n(&g_refcount, __ATOMIC_ACQUIRE) > 0; }

const inventory_t *nvml_view(void) { return &g_view; }

const inv_gpu_t *nvml_gpu(nvmlDevice_t device) {
    if (device < &g_devices[0] || device >= &g_devices[g_view.gpu_count]) return NULL;
    if (((const char *)device - (const char *)g_devices) % sizeof g_devices[0]) return NULL;
    return &g_view.gpus[device->index];
}

nvmlDevice_t nvml_handle(unsigned int index) { return &g_devices[index]; }

nvmlReturn_t nvml_copy_string(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

unsigned long long nvml_used_bytes(const inv_gpu_t *gpu) {
    struct gpt_entry procs[64];
    int n = gpt_list(gpu->physical_index, procs, 64);
    unsigned long long used = 0;
    for (int i = 0; i < n && i < 64; i++) used += procs[i].used_bytes;
    unsigned long long total = gpu->memory_mib << 20;
    return used > total ? total : used;
}
