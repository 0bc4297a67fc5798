/* Streams and events of the mock driver.  Work completes when it is issued, so every
 * stream is always idle and every recorded event complete; what is checked is that
 * handles are live and belong to a context, as the driver checks them.  Handles are
 * never freed (a destroyed one is recycled), so a stale handle reads as invalid
 * rather than touching freed memory. */
#include "cuda_internal.h"

#include <stdlib.h>
#include <time.h>

#define STREAM_MAGIC 0x73747231u
#define EVENT_MAGIC 0x65767431u
#define MAX_HANDLES 4096

struct CUstream_st {
    unsigned magic;
    int device;
    unsigned flags;
    int priority;
    CUcontext ctx;
};

struct CUevent_st {
    unsigned magic;
    int device;
    unsigned flags;
    int recorded;
    double when_ms;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st g_streams[MAX_HANDLES];
static struct CUevent_st g_events[MAX_HANDLES];

static int stream_live(CUstream s) {
    return s >= &g_streams[0] && s < &g_streams[MAX_HANDLES] && __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == STREAM_MAGIC;
}

static int event_live(CUevent e) {
    return e >= &g_events[0] && e < &g_events[MAX_HANDLES] && __atomic_load_n(&e->magic, __ATOMIC_ACQUIRE) == EVENT_MAGIC;
}

int cuda_stream_device(CUstream s, int *dev) {
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        CUdevice d;
        *dev = cuda_current_device(&d) == CUDA_SUCCESS ? d : -1;
        return 1;
    }
    if (!stream_live(s)) return 0;
    *dev = s->device;
    return 1;
}

/* CUDA_SUCCESS and the device of s, or the error the driver gives for it. */
static CUresult stream_check(CUstream s, int *dev) {
    CHECK_INIT();
    if (!cuda_stream_device(s, dev)) return CUDA_ERROR_INVALID_HANDLE;
    return *dev < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    CHECK_INIT();
    if (leastPriority) *leastPriority = 0;
    if (greatestPriority) *greatestPriority = -5;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    if (priority > 0) priority = 0; /* clamped to the range, as the driver does */
    if (priority < -5) priority = -5;
    pthread_mutex_lock(&g_lock);
    struct CUstream_st *s = NULL;
    for (int i = 0; i < MAX_HANDLES && !s; i++)
        if (g_streams[i].magic != STREAM_MAGIC) s = &g_streams[i];
    if (s) {
        *s = (struct CUstream_st){0, dev, flags, priority, cuda_current_context()};
        __atomic_store_n(&s->magic, STREAM_MAGIC, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *phStream = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) { return cuStreamCreateWithPriority(phStream, Flags, 0); }

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    CHECK_INIT();
    pthread_mutex_lock(&g_lock);
    int ok = stream_live(hStream);
    if (ok) __atomic_store_n(&hStream->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    int dev;
    return stream_check(hStream, &dev);
}
EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return cuStreamSynchronize(hStream); }

EXPORT CUresult cuStreamQuery(CUstream hStream) {
    int dev;
    return stream_check(hStream, &dev); /* idle: all work completed when issued */
}
EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream) { return cuStreamQuery(hStream); }

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    int dev;
    CUresult rc = stream_check(hStream, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!event_live(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
    return Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    return cuStreamWaitEvent(hStream, hEvent, Flags);
}

EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) {
    int dev;
    CUresult rc = stream_check(hStream, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    *flags = stream_live(hStream) ? hStream->flags : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) { return cuStreamGetFlags(hStream, flags); }

EXPORT CUresult cuStreamGetPriority(CUstream hStream, int *priority) {
    int dev;
    CUresult rc = stream_check(hStream, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!priority) return CUDA_ERROR_INVALID_VALUE;
    *priority = stream_live(hStream) ? hStream->priority : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority) { return cuStreamGetPriority(hStream, priority); }

EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx) {
    int dev;
    CUresult rc = stream_check(hStream, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = stream_live(hStream) ? hStream->ctx : cuda_current_context();
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx) { return cuStreamGetCtx(hStream, pctx); }

/* ---- events ---- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    CUdevice dev;
    CUresult rc = cuda_current_device(&dev);
    if (rc != CUDA_SUCCESS) return rc;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!phEvent || (Flags & ~known) ||
        ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    struct CUevent_st *e = NULL;
    for (int i = 0; i < MAX_HANDLES && !e; i++)
        if (g_events[i].magic != EVENT_MAGIC) e = &g_events[i];
    if (e) {
        *e = (struct CUevent_st){0, dev, Flags, 0, 0};
        __atomic_store_n(&e->magic, EVENT_MAGIC, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    int dev;
    CUresult rc = stream_check(hStream, &dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (!event_live(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
    if (hEvent->device != dev) return CUDA_ERROR_INVALID_HANDLE;
    hEvent->when_ms = now_ms();
    hEvent->recorded = 1;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { return cuEventRecord(hEvent, hStream); }

EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    return cuEventRecord(hEvent, hStream);
}
EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
    return cuEventRecordWithFlags(hEvent, hStream, flags);
}

EXPORT CUresult cuEventQuery(CUevent hEvent) {
    CHECK_INIT();
    return event_live(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent) { return cuEventQuery(hEvent); }

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    CHECK_INIT();
    pthread_mutex_lock(&g_lock);
    int ok = event_live(hEvent);
    if (ok) __atomic_store_n(&hEvent->magic, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
EXPORT CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    CHECK_INIT();
    if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
    if (!event_live(hStart) || !event_live(hEnd)) return CUDA_ERROR_INVALID_HANDLE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!hStart->recorded || !hEnd->recorded) return CUDA_ERROR_INVALID_HANDLE;
    *pMilliseconds = (float)(hEnd->when_ms - hStart->when_ms);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}
