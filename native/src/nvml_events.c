/* Mock NVML events.  A mock card never raises one (no ECC error, Xid or clock
 * change happens), so a wait ends with NVML_ERROR_TIMEOUT after its timeout, as on
 * a healthy idle card; registration checks the types the card supports. */
#include "nvml_engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next;
    unsigned long long registered[INV_MAX_GPUS];
};

static pthread_mutex_t g_sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlEventSet_st *g_sets; /* live sets: a handle is checked before use */

static int live(nvmlEventSet_t set) {
    int found = 0;
    pthread_mutex_lock(&g_sets_lock);
    for (struct nvmlEventSet_st *s = g_sets; s && !found; s = s->next) found = s == set;
    pthread_mutex_unlock(&g_sets_lock);
    return found;
}

static unsigned long long supported_types(const inv_gpu_t *gpu) {
    unsigned long long types = nvmlEventTypePState | nvmlEventTypeXidCriticalError | nvmlEventTypeClock;
    if (gpu->model.ecc) types |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    return types;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlEventSet_st *s = calloc(1, sizeof *s);
    if (!s) return NVML_ERROR_MEMORY;
    pthread_mutex_lock(&g_sets_lock);
    s->next = g_sets;
    g_sets = s;
    pthread_mutex_unlock(&g_sets_lock);
    *set = s;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&g_sets_lock);
    for (struct nvmlEventSet_st **p = &g_sets; *p; p = &(*p)->next)
        if (*p == set) {
            *p = set->next;
            free(set);
            rc = NVML_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&g_sets_lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(eventTypes);
    *eventTypes = supported_types(gpu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    CHECK_DEVICE(device, gpu);
    if (!live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    if (eventTypes & ~supported_types(gpu)) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_sets_lock);
    set->registered[device->index] |= eventTypes;
    pthread_mutex_unlock(&g_sets_lock);
    return NVML_SUCCESS;
}

/* Sleep the whole timeout (restarting after signals): nothing ever arrives. */
static nvmlReturn_t wait_nothing(nvmlEventSet_t set, void *data, unsigned int timeoutms) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!data || !live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeoutms / 1000;
    until.tv_nsec += (long)(timeoutms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
    return NVML_ERROR_TIMEOUT;
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return wait_nothing(set, data, timeoutms);
}
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return wait_nothing(set, data, timeoutms);
}
