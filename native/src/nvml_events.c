/* Mock NVML events.  The one event a mock card raises is an Xid error: the inventory
 * gives each card its last Xid (`xid: 48`), read at run time, and every change to a
 * non-zero value reaches each set that registered nvmlEventTypeXidCriticalError for
 * that card, once, with the card's handle and the Xid as eventData, as the real
 * driver reports an Xid.  What a card showed when the set registered is not news.
 * A set sees the file as it reads when the set waits: an Xid that comes and goes
 * between two waits of a set is not queued for it.
 * Nothing else ever happens (no ECC count, P-state or clock change), so a wait with
 * nothing to deliver ends with NVML_ERROR_TIMEOUT after its timeout. */
#include "nvml_engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next;
    unsigned long long registered[INV_MAX_GPUS];
    unsigned int xid_seen[INV_MAX_GPUS]; /* per card: the Xid this set last knew of */
};

/* Per MIG: no instance (the mock has no MIG), as the real driver fills it then. */
#define NO_INSTANCE 0xFFFFFFFFu
/* How often a wait looks at the inventory again. */
#define POLL_NS 50000000L

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

/* The Xid the inventory gives container card i now (the last known one when the
 * file cannot be read: a reader never turns a bad moment into an event). */
static unsigned int xid_now(const inventory_t *now, unsigned int i) {
    if (now && i < now->gpu_count) return now->gpus[i].xid;
    return nvml_view()->gpus[i].xid;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    CHECK_DEVICE(device, gpu);
    if (!live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    if (eventTypes & ~supported_types(gpu)) return NVML_ERROR_NOT_SUPPORTED;
    inventory_t *now = malloc(sizeof *now);
    if (now && nvml_engine_read_now(now) != 0) {
        free(now);
        now = NULL;
    }
    pthread_mutex_lock(&g_sets_lock);
    if ((eventTypes & nvmlEventTypeXidCriticalError) && !(set->registered[device->index] & nvmlEventTypeXidCriticalError))
        set->xid_seen[device->index] = xid_now(now, device->index);
    set->registered[device->index] |= eventTypes;
    pthread_mutex_unlock(&g_sets_lock);
    free(now);
    return NVML_SUCCESS;
}

/* The first Xid news for the set in `now`, written to data; 0 when there is none. */
static int take_xid(nvmlEventSet_t set, const inventory_t *now, nvmlEventData_t *data, int v2) {
    int found = 0;
    pthread_mutex_lock(&g_sets_lock);
    unsigned int count = now->gpu_count < nvml_view()->gpu_count ? now->gpu_count : nvml_view()->gpu_count;
    for (unsigned int i = 0; i < count && !found; i++) {
        const inv_gpu_t *gpu = &now->gpus[i];
        if (!(set->registered[i] & nvmlEventTypeXidCriticalError) || gpu->lost || gpu->xid == set->xid_seen[i])
            continue;
        set->xid_seen[i] = gpu->xid;
        if (gpu->xid == 0) continue; /* cleared: nothing happened to report */
        data->device = nvml_handle(i);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = gpu->xid;
        if (v2) { /* the first version's data ends before the instance IDs */
            data->gpuInstanceId = NO_INSTANCE;
            data->computeInstanceId = NO_INSTANCE;
        }
        found = 1;
    }
    pthread_mutex_unlock(&g_sets_lock);
    return found;
}

static int after(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

static void add_ns(struct timespec *t, long long ns) {
    t->tv_sec += ns / 1000000000LL;
    t->tv_nsec += ns % 1000000000LL;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

/* Deliver the next Xid news at once, or look again every POLL_NS until the timeout
 * (sleeps restart after signals); NVML_ERROR_TIMEOUT when none came. */
static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms, int v2) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!data || !live(set)) return NVML_ERROR_INVALID_ARGUMENT;
    inventory_t *now = malloc(sizeof *now);
    if (!now) return NVML_ERROR_MEMORY;
    struct timespec until, next;
    clock_gettime(CLOCK_MONOTONIC, &until);
    add_ns(&until, (long long)timeoutms * 1000000LL);
    for (;;) {
        if (!live(set)) { /* freed by another thread meanwhile */
            free(now);
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        if (nvml_engine_read_now(now) == 0 && take_xid(set, now, data, v2)) {
            free(now);
            return NVML_SUCCESS;
        }
        clock_gettime(CLOCK_MONOTONIC, &next);
        if (after(&next, &until)) break;
        add_ns(&next, POLL_NS);
        if (after(&next, &until)) next = until;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
    }
    free(now);
    return NVML_ERROR_TIMEOUT;
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return wait_event(set, data, timeoutms, 1);
}
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return wait_event(set, data, timeoutms, 0);
}
