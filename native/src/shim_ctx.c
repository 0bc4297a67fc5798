/* CUDA contexts count against the share.
 *
 * A context takes memory on its card (a few hundred MiB on real cards; the mock
 * driver's CONTEXT_RESERVE_BYTES) that the driver gives no allocation call for: a pod
 * that starts one process per worker, or a hostile one that starts dozens holding only
 * a context, would take that much of the card beyond its share, out of its
 * neighbours'.  So the first context a process holds on a card (primary context
 * retain or cuCtxCreate) charges SHIM_CONTEXT_CHARGE_MIB to that card's share, the
 * last one released or destroyed gives it back, and a process that dies gives it back
 * with the rest of its usage (shim_usage.c reclaims its slot).
 *
 * The reference shim refuses a context the share cannot hold (the context is given
 * back and the call answers CUDA_ERROR_OUT_OF_MEMORY).  The hami-like build
 * (SHIM_HAMI_LIKE) charges it even past the share, as HAMi-core does, which only
 * refuses later allocations. */
#include "shim_cuda.h"

#include <pthread.h>

#ifndef SHIM_CONTEXT_CHARGE_MIB
#ifdef SHIM_HAMI_LIKE
#define SHIM_CONTEXT_CHARGE_MIB 300 /* HAMi-core's figure */
#else
#define SHIM_CONTEXT_CHARGE_MIB 304 /* what the mock driver's context takes (CONTEXT_RESERVE_BYTES) */
#endif
#endif
#define CONTEXT_CHARGE_BYTES ((uint64_t)SHIM_CONTEXT_CHARGE_MIB << 20)

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_ctx_refs[SHIM_MAX_DEVICES]; /* contexts this process holds per container card */
static CUcontext g_ctx_created[256];     /* cuCtxCreate contexts and their card, to uncharge on destroy */
static int g_ctx_created_card[256];

/* One more (delta = +1) or one less (-1) context on container card `card`: 0, or -1
 * when the share cannot hold one more (the reference build; nothing is counted then). */
static int context_ref(int card, int delta) {
    if (card < 0 || card >= SHIM_MAX_DEVICES) return 0;
    if (UNLIKELY(shim_config()->fault & SHIM_FAULT_CONTEXTS_UNCHARGED)) return 0; /* fault: contexts cost nothing */
    uint64_t limit = shim_card_limit(card);
    pthread_mutex_lock(&g_ctx_lock);
    int before = g_ctx_refs[card];
    int after = before + delta;
    if (after < 0) after = 0;
    g_ctx_refs[card] = after;
    pthread_mutex_unlock(&g_ctx_lock);
    if (!limit) return 0;
    if (before == 0 && after > 0) {
        if (usage_reserve(card, CONTEXT_CHARGE_BYTES, limit) == 0) return 0;
#ifdef SHIM_HAMI_LIKE
        /* The driver made the context already: charge it even past the share. */
        usage_force_reserve(card, CONTEXT_CHARGE_BYTES);
        return 0;
#else
        pthread_mutex_lock(&g_ctx_lock);
        g_ctx_refs[card] = before;
        pthread_mutex_unlock(&g_ctx_lock);
        return -1;
#endif
    } else if (before > 0 && after == 0) {
        usage_give_back(card, CONTEXT_CHARGE_BYTES);
    }
    return 0;
}

static void remember_created(CUcontext ctx, int card) {
    pthread_mutex_lock(&g_ctx_lock);
    for (size_t i = 0; i < sizeof g_ctx_created / sizeof g_ctx_created[0]; i++)
        if (!g_ctx_created[i]) {
            g_ctx_created[i] = ctx;
            g_ctx_created_card[i] = card;
            break;
        }
    pthread_mutex_unlock(&g_ctx_lock);
}

static int forget_created(CUcontext ctx) {
    int card = -1;
    pthread_mutex_lock(&g_ctx_lock);
    for (size_t i = 0; i < sizeof g_ctx_created / sizeof g_ctx_created[0]; i++)
        if (ctx && g_ctx_created[i] == ctx) {
            g_ctx_created[i] = NULL;
            card = g_ctx_created_card[i];
            break;
        }
    pthread_mutex_unlock(&g_ctx_lock);
    return card;
}

#define CTX_REAL(name, type) ((type)shim_real_cuda(#name))
#define CTX_GUARD(real)                                         \
    do {                                                        \
        shim_mode_t m_ = shim_cuda_mode();                      \
        if (m_ == SHIM_BROKEN) return shim_refuse_cuda();       \
        if (!(real)) return CUDA_ERROR_NOT_FOUND;               \
        limited = m_ == SHIM_LIMITED;                           \
    } while (0)

static CUresult create_common(CUresult (*real)(CUcontext *, unsigned int, CUdevice), CUcontext *pctx,
                              unsigned int flags, CUdevice dev) {
    int limited;
    CTX_GUARD(real);
    CUresult rc = real(pctx, flags, dev);
    if (rc == CUDA_SUCCESS && limited) {
        int card = shim_card_of_device(dev);
        if (context_ref(card, +1) != 0) {
            CUresult (*destroy)(CUcontext) = CTX_REAL(cuCtxDestroy_v2, CUresult(*)(CUcontext));
            if (destroy) destroy(*pctx);
            *pctx = NULL;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        remember_created(*pctx, card);
    }
    return rc;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    return create_common(CTX_REAL(cuCtxCreate_v2, CUresult(*)(CUcontext *, unsigned int, CUdevice)), pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    return create_common(CTX_REAL(cuCtxCreate, CUresult(*)(CUcontext *, unsigned int, CUdevice)), pctx, flags, dev);
}

static CUresult destroy_common(CUresult (*real)(CUcontext), CUcontext ctx) {
    int limited;
    CTX_GUARD(real);
    CUresult rc = real(ctx);
    if (rc == CUDA_SUCCESS && limited) context_ref(forget_created(ctx), -1);
    return rc;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return destroy_common(CTX_REAL(cuCtxDestroy_v2, CUresult(*)(CUcontext)), ctx); }

EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return destroy_common(CTX_REAL(cuCtxDestroy, CUresult(*)(CUcontext)), ctx); }

/* Primary contexts: the driver counts retains; the share is charged while this
 * process holds at least one. */
static int g_primary_refs[SHIM_MAX_DEVICES];

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    CUresult (*real)(CUcontext *, CUdevice) = CTX_REAL(cuDevicePrimaryCtxRetain, CUresult(*)(CUcontext *, CUdevice));
    int limited;
    CTX_GUARD(real);
    CUresult rc = real(pctx, dev);
    if (rc == CUDA_SUCCESS && limited) {
        int card = shim_card_of_device(dev);
        if (card < 0) return rc;
        pthread_mutex_lock(&g_ctx_lock);
        int first = g_primary_refs[card]++ == 0;
        pthread_mutex_unlock(&g_ctx_lock);
        if (first && context_ref(card, +1) != 0) {
            pthread_mutex_lock(&g_ctx_lock);
            g_primary_refs[card]--;
            pthread_mutex_unlock(&g_ctx_lock);
            CUresult (*release)(CUdevice) = CTX_REAL(cuDevicePrimaryCtxRelease_v2, CUresult(*)(CUdevice));
            if (release) release(dev);
            *pctx = NULL;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return rc;
}

static CUresult release_common(CUresult (*real)(CUdevice), CUdevice dev) {
    int limited;
    CTX_GUARD(real);
    CUresult rc = real(dev);
    if (rc == CUDA_SUCCESS && limited) {
        int card = shim_card_of_device(dev);
        if (card < 0) return rc;
        pthread_mutex_lock(&g_ctx_lock);
        int last = g_primary_refs[card] > 0 && --g_primary_refs[card] == 0;
        pthread_mutex_unlock(&g_ctx_lock);
        if (last) context_ref(card, -1);
    }
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    return release_common(CTX_REAL(cuDevicePrimaryCtxRelease_v2, CUresult(*)(CUdevice)), dev);
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    return release_common(CTX_REAL(cuDevicePrimaryCtxRelease, CUresult(*)(CUdevice)), dev);
}

/* CUDA state does not survive fork: the child holds no context. */
static void ctx_after_fork_in_child(void) {
    pthread_mutex_init(&g_ctx_lock, NULL);
    for (int i = 0; i < SHIM_MAX_DEVICES; i++) g_ctx_refs[i] = g_primary_refs[i] = 0;
    for (size_t i = 0; i < sizeof g_ctx_created / sizeof g_ctx_created[0]; i++) g_ctx_created[i] = NULL;
}

__attribute__((constructor)) static void ctx_start(void) { pthread_atfork(NULL, NULL, ctx_after_fork_in_child); }
