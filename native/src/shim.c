/* libgpushare-shim.so: per-card memory limits for CUDA programs, preloaded into
 * every process of a container (LD_PRELOAD or /etc/ld.so.preload).
 *
 * It exports the memory-related CUDA driver and NVML entry points, so direct calls
 * bind to it, and it hands out the same hooks from dlsym() and cuGetProcAddress(), so
 * a program that resolves symbols itself cannot step around it.  The real functions
 * come from the libraries found as libcuda.so.1 / libnvidia-ml.so.1, whether the
 * mocks of this project or NVIDIA's: nothing here depends on which. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_config.h"
#include "shim_usage.h"
#include "shim_pool.h"
#include "shim_cuda.h"
#include "shim_loader.h"

#ifndef EXPORT
#define EXPORT __attribute__((visibility("default")))
#endif

/* ---- the real dlsym ----------------------------------------------------------- */

typedef void *(*dlsym_fn_t)(void *, const char *);
HIDDEN dlsym_fn_t gpushare_real_dlsym;

/* Runs inside dlsym, which sanitizer runtimes call before they are set up: no
 * instrumentation here, and no intercepted libc calls on the early path. */
#define EARLY_SAFE __attribute__((no_sanitize_address, noinline))

EARLY_SAFE static void resolve_real_dlsym(void) {
    if (__atomic_load_n(&gpushare_real_dlsym, __ATOMIC_ACQUIRE)) return;
    /* Read from the C library's symbol table: the shim's own dlvsym (shim_loader.c)
     * would answer a lookup with the shim's dlsym. */
    void *p = shim_libc_function("dlsym");
    if (!p) {
        static const char msg[] = "gpushare-shim: cannot find the C library's dlsym\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        abort();
    }
    __atomic_store_n(&gpushare_real_dlsym, (dlsym_fn_t)p, __ATOMIC_RELEASE);
    shim_loader_resolve();
}

/* ---- hook tables -------------------------------------------------------------- */

#define CUDA_HOOKS(X)          \
    X(cuInit)                  \
    X(cuDeviceTotalMem)        \
    X(cuDeviceTotalMem_v2)     \
    X(cuMemGetInfo)            \
    X(cuMemGetInfo_v2)         \
    X(cuMemAlloc)              \
    X(cuMemAlloc_v2)           \
    X(cuMemAllocPitch)         \
    X(cuMemAllocPitch_v2)      \
    X(cuMemAllocManaged)       \
    X(cuMemFree)               \
    X(cuMemFree_v2)            \
    X(cuGetProcAddress)        \
    X(cuGetProcAddress_v2)     \
    SHIM_POOL_HOOKS(X)         \
    SHIM_VMM_HOOKS(X)          \
    SHIM_ARRAY_HOOKS(X)        \
    SHIM_CTX_HOOKS(X)

#define NVML_HOOKS(X)              \
    X(nvmlInit)                    \
    X(nvmlInit_v2)                 \
    X(nvmlInitWithFlags)           \
    X(nvmlDeviceGetMemoryInfo)     \
    X(nvmlDeviceGetMemoryInfo_v2)

#define ENUM_ENTRY(name) H_##name,
enum { CUDA_HOOKS(ENUM_ENTRY) H_CUDA_COUNT };
enum { NVML_HOOKS(ENUM_ENTRY) H_NVML_COUNT };
#define NAME_ENTRY(name) #name,
static const char *const CUDA_NAMES[] = {CUDA_HOOKS(NAME_ENTRY)};
static const char *const NVML_NAMES[] = {NVML_HOOKS(NAME_ENTRY)};
/* Our own definitions (bound locally: the shim is linked with -Bsymbolic). */
#define HOOK_ENTRY(name) (void *)name,
static void *const CUDA_HOOK_FNS[] = {CUDA_HOOKS(HOOK_ENTRY)};
static void *const NVML_HOOK_FNS[] = {NVML_HOOKS(HOOK_ENTRY)};

static void *g_real_cuda[H_CUDA_COUNT];
static void *g_real_nvml[H_NVML_COUNT];
/* Real entry points the shim calls but does not replace. */
static CUresult (*real_cuCtxGetDevice)(CUdevice *);
static CUresult (*real_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*real_cuDeviceGetCount)(int *);
static nvmlReturn_t (*real_nvmlDeviceGetIndex)(nvmlDevice_t, unsigned int *);

static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT, g_nvml_once = PTHREAD_ONCE_INIT;
static void *g_nvml_lib;
static void *g_cuda_lib;

static void load_cuda(void) {
    resolve_real_dlsym();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return; /* no driver: every hook answers CUDA_ERROR_NOT_FOUND */
    g_cuda_lib = lib;
    for (int i = 0; i < H_CUDA_COUNT; i++) g_real_cuda[i] = gpushare_real_dlsym(lib, CUDA_NAMES[i]);
    real_cuCtxGetDevice = (CUresult(*)(CUdevice *))gpushare_real_dlsym(lib, "cuCtxGetDevice");
    real_cuDeviceGetPCIBusId = (CUresult(*)(char *, int, CUdevice))gpushare_real_dlsym(lib, "cuDeviceGetPCIBusId");
    real_cuDeviceGetCount = (CUresult(*)(int *))gpushare_real_dlsym(lib, "cuDeviceGetCount");
}

static void load_nvml(void) {
    resolve_real_dlsym();
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    g_nvml_lib = lib;
    for (int i = 0; i < H_NVML_COUNT; i++) g_real_nvml[i] = gpushare_real_dlsym(lib, NVML_NAMES[i]);
    real_nvmlDeviceGetIndex = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *))gpushare_real_dlsym(lib, "nvmlDeviceGetIndex");
}

static inline void *real_cuda(int i) {
    pthread_once(&g_cuda_once, load_cuda);
    return g_real_cuda[i];
}
static inline void *real_nvml(int i) {
    pthread_once(&g_nvml_once, load_nvml);
    return g_real_nvml[i];
}

static inline shim_mode_t mode(void) { return shim_config()->mode; }

/* ---- dlsym ----------------------------------------------------------------------- */

/* Decide whether a dlsym() lookup gets one of our hooks; NULL means "let the C
 * library answer".  Called by the dlsym entry below before anything else. */
static void *hooked_symbol(const char *name);

EARLY_SAFE void *gpushare_dlsym_hook(void *handle, const char *name) {
    (void)handle;
    resolve_real_dlsym();
    if (!name || name[0] == '\0') return NULL;
    int cuda = name[0] == 'c' && name[1] == 'u';
    int nvml = name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l';
    if ((name[0] == 'd' && name[1] == 'l') || (name[0] == '_' && name[1] == '_')) return shim_loader_symbol(name);
    if (!cuda && !nvml) return NULL;
    return hooked_symbol(name);
}

static void *hooked_symbol(const char *name) {
    if (mode() == SHIM_PASSTHROUGH) return NULL;
    if (name[1] == 'u') {
        for (int i = 0; i < H_CUDA_COUNT; i++)
            if (strcmp(name, CUDA_NAMES[i]) == 0) return real_cuda(i) ? CUDA_HOOK_FNS[i] : NULL;
    } else {
        for (int i = 0; i < H_NVML_COUNT; i++)
            if (strcmp(name, NVML_NAMES[i]) == 0) return real_nvml(i) ? NVML_HOOK_FNS[i] : NULL;
    }
    return NULL;
}

/* dlsym itself.  Lookups we do not hook must reach the C library's dlsym as a tail
 * jump, so that it sees the caller's return address: RTLD_NEXT is relative to the
 * calling object, and a plain call from here would make it relative to the shim. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    .cfi_startproc\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call gpushare_dlsym_hook\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    jmp *gpushare_real_dlsym(%rip)\n"
        "1:  ret\n"
        "    .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "    stp x29, x30, [sp, #-32]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    bl gpushare_dlsym_hook\n"
        "    mov x9, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        "    cbnz x9, 1f\n"
        "    adrp x10, gpushare_real_dlsym\n"
        "    ldr x10, [x10, #:lo12:gpushare_real_dlsym]\n"
        "    br x10\n"
        "1:  mov x0, x9\n"
        "    ret\n"
        ".size dlsym, .-dlsym\n");
#else
#error "dlsym trampoline: unsupported architecture"
#endif

/* ---- device numbering ------------------------------------------------------------ */

/* CUDA device ordinal -> container card (the numbering of GPUSHARE_MEMORY_LIMIT_<i>
 * and of NVML), -1 when it cannot be told.  CUDA_VISIBLE_DEVICES of plain indices is
 * read directly; UUIDs are matched through the PCI bus ids NVML and CUDA report. */
static int g_card_of[SHIM_MAX_DEVICES];
static pthread_once_t g_map_once = PTHREAD_ONCE_INIT;

static int bus_ids_equal(const char *a, const char *b) {
    unsigned int d1, b1, v1, f1, d2, b2, v2, f2;
    if (sscanf(a, "%x:%x:%x.%x", &d1, &b1, &v1, &f1) != 4) return 0;
    if (sscanf(b, "%x:%x:%x.%x", &d2, &b2, &v2, &f2) != 4) return 0;
    return d1 == d2 && b1 == b2 && v1 == v2 && f1 == f2;
}

static void map_by_bus_id(void) {
    pthread_once(&g_nvml_once, load_nvml);
    if (!g_nvml_lib || !real_cuDeviceGetPCIBusId || !real_cuDeviceGetCount) return;
    nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))g_real_nvml[H_nvmlInit_v2];
    nvmlReturn_t (*count)(unsigned int *) = (nvmlReturn_t(*)(unsigned int *))gpushare_real_dlsym(g_nvml_lib, "nvmlDeviceGetCount_v2");
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *) =
        (nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))gpushare_real_dlsym(g_nvml_lib, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *) =
        (nvmlReturn_t(*)(nvmlDevice_t, nvmlPciInfo_t *))gpushare_real_dlsym(g_nvml_lib, "nvmlDeviceGetPciInfo_v3");
    nvmlReturn_t (*shutdown)(void) = (nvmlReturn_t(*)(void))gpushare_real_dlsym(g_nvml_lib, "nvmlShutdown");
    unsigned int cards = 0;
    int ordinals = 0;
    if (!init || !count || !handle || !pci || init() != NVML_SUCCESS) return;
    if (count(&cards) == NVML_SUCCESS && real_cuDeviceGetCount(&ordinals) == CUDA_SUCCESS) {
        for (int d = 0; d < ordinals && d < SHIM_MAX_DEVICES; d++) {
            char bus[64];
            if (real_cuDeviceGetPCIBusId(bus, sizeof bus, d) != CUDA_SUCCESS) continue;
            for (unsigned int c = 0; c < cards && c < SHIM_MAX_DEVICES; c++) {
                nvmlDevice_t h;
                nvmlPciInfo_t info;
                if (handle(c, &h) == NVML_SUCCESS && pci(h, &info) == NVML_SUCCESS && bus_ids_equal(bus, info.busId))
                    g_card_of[d] = (int)c;
            }
        }
    }
    if (shutdown) shutdown();
}

static void build_device_map(void) {
    for (int i = 0; i < SHIM_MAX_DEVICES; i++) g_card_of[i] = -1;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd || UNLIKELY(shim_config()->fault & SHIM_FAULT_ORDINAL_CARDS)) { /* fault: CUDA's ordinal taken as the card */
        for (int i = 0; i < SHIM_MAX_DEVICES; i++) g_card_of[i] = i;
        return;
    }
    char list[1024];
    snprintf(list, sizeof list, "%s", cvd);
    int n = 0, all_numeric = 1;
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok && n < SHIM_MAX_DEVICES; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        char *end;
        long v = strtol(tok, &end, 10);
        if (!isdigit((unsigned char)tok[0]) || *end || v < 0 || v >= SHIM_MAX_DEVICES) {
            all_numeric = 0;
            break;
        }
        g_card_of[n++] = (int)v;
    }
    if (!all_numeric) {
        for (int i = 0; i < SHIM_MAX_DEVICES; i++) g_card_of[i] = -1;
        map_by_bus_id();
    }
}

static int g_map_ready;

static int card_of(CUdevice dev) {
    if (UNLIKELY(!__atomic_load_n(&g_map_ready, __ATOMIC_ACQUIRE))) {
        pthread_once(&g_map_once, build_device_map);
        __atomic_store_n(&g_map_ready, 1, __ATOMIC_RELEASE);
    }
    if (dev < 0 || dev >= SHIM_MAX_DEVICES) return -1;
    return g_card_of[dev];
}

static uint64_t limit_of(int card) { return card >= 0 ? shim_config()->limit[card] : 0; }

static void report_unmapped(CUdevice dev) {
    static int reported;
    if (__atomic_exchange_n(&reported, 1, __ATOMIC_ACQ_REL)) return;
    fprintf(stderr, "gpushare-shim: cannot tell which container card CUDA device %d is; refusing allocations on it\n",
            (int)dev);
}

/* ---- CUDA-side state, settled on the first CUDA call ----------------------------- */

static int g_cuda_ready;       /* g_mode, g_limit and g_real_cuda are set */
static shim_mode_t g_mode;
static uint64_t g_limit[SHIM_MAX_DEVICES];

static __attribute__((noinline)) void cuda_init(void) {
    const shim_config_t *cfg = shim_config();
    pthread_once(&g_cuda_once, load_cuda);
    memcpy(g_limit, cfg->limit, sizeof g_limit);
    if (UNLIKELY(cfg->fault & SHIM_FAULT_EXACT_FIT_REFUSED)) /* fault: reservations stop a byte short */
        for (int i = 0; i < SHIM_MAX_DEVICES; i++)
            if (g_limit[i] > 1) g_limit[i]--;
    g_mode = cfg->mode;
    __atomic_store_n(&g_cuda_ready, 1, __ATOMIC_RELEASE);
}

/* The mode, with the real CUDA entry points loaded: a load and a test once settled. */
static inline shim_mode_t cuda_mode(void) {
    if (UNLIKELY(!__atomic_load_n(&g_cuda_ready, __ATOMIC_ACQUIRE))) cuda_init();
    return g_mode;
}

shim_mode_t shim_cuda_mode(void) { return cuda_mode(); }

void *shim_real_cuda(const char *name) {
    pthread_once(&g_cuda_once, load_cuda);
    return g_cuda_lib ? gpushare_real_dlsym(g_cuda_lib, name) : NULL;
}

uint64_t shim_card_limit(int card) { return card >= 0 && card < SHIM_MAX_DEVICES ? g_limit[card] : 0; }

/* ---- per-process allocation table: pointer -> (card, bytes) -----------------------
 * Open addressing with linear probing and backward-shift deletion (no tombstones, so
 * probes stay short however many allocations come and go).  While the process has a
 * single thread no lock is needed; otherwise a spin lock guards a few dozen
 * instructions (the table never calls into the driver). */

typedef struct {
    CUdeviceptr ptr; /* 0 = empty */
    uint64_t packed; /* bytes << 6 | card */
} tracked_t;
#define PACK_CARD_BITS 6
#define PACK_MAX_BYTES (UINT64_MAX >> PACK_CARD_BITS)

static tracked_t g_table_none[2]; /* an empty two-slot table until the first insert */
static tracked_t *g_table = g_table_none;
static size_t g_table_mask = 1;      /* capacity - 1 */
static unsigned g_table_shift = 63;  /* 64 - log2(capacity) */
/* g_table_count, the entries: defined with the pools, which read it (shim_pool.h) */
static size_t g_table_grow_at; /* grow before count reaches capacity / 2 */
static int g_table_lock;

static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static inline int local_lock(void) {
    if (LIKELY(__libc_single_threaded)) return 0;
    while (__atomic_exchange_n(&g_table_lock, 1, __ATOMIC_ACQUIRE)) {
        for (int spins = 0; __atomic_load_n(&g_table_lock, __ATOMIC_RELAXED); spins++) {
            if (spins < 100) cpu_relax();
            else sched_yield();
        }
    }
    return 1;
}

static inline void local_unlock(int locked) {
    if (locked) __atomic_store_n(&g_table_lock, 0, __ATOMIC_RELEASE);
}

static inline size_t home_of(CUdeviceptr p) { return (size_t)((p * 0x9E3779B97F4A7C15ULL) >> g_table_shift); }

static inline void table_insert(CUdeviceptr p, uint64_t packed) {
    size_t i = home_of(p);
    while (g_table[i].ptr) i = (i + 1) & g_table_mask;
    g_table[i].ptr = p;
    g_table[i].packed = packed;
    g_table_count++;
}

static __attribute__((noinline)) int table_grow(void) {
    size_t old_cap = g_table == g_table_none ? 0 : g_table_mask + 1;
    size_t cap = old_cap ? old_cap * 2 : 1024;
    tracked_t *old = g_table, *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return -1;
    g_table = fresh;
    g_table_mask = cap - 1;
    g_table_shift = 64 - (unsigned)__builtin_ctzll(cap);
    g_table_grow_at = cap / 2;
    g_table_count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].ptr) table_insert(old[i].ptr, old[i].packed);
    if (old != g_table_none) free(old);
    return 0;
}

static inline int table_put_locked(CUdeviceptr p, uint64_t bytes, int card) {
    if (UNLIKELY(bytes > PACK_MAX_BYTES || p == 0)) return -1;
    if (UNLIKELY(g_table_count >= g_table_grow_at) && table_grow() != 0) return -1;
    table_insert(p, bytes << PACK_CARD_BITS | (uint64_t)card);
    return 0;
}

/* The entry of p (not 0), or NULL.  Caller holds the local lock. */
static inline tracked_t *table_find(CUdeviceptr p) {
    for (size_t i = home_of(p);; i = (i + 1) & g_table_mask) {
        tracked_t *e = &g_table[i];
        if (e->ptr == p) return e;
        if (!e->ptr) return NULL;
    }
}

static __attribute__((noinline)) void table_remove_shift(tracked_t *e) {
    size_t mask = g_table_mask, i = (size_t)(e - g_table);
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        CUdeviceptr k = g_table[j].ptr;
        if (!k) break;
        if (((j - home_of(k)) & mask) >= ((j - i) & mask)) {
            g_table[i] = g_table[j];
            i = j;
        }
    }
    g_table[i].ptr = 0;
    g_table_count--;
}

/* Remove an entry found by table_find; the common case (the next slot is empty, so
 * no entry has to move back) is a store. */
static inline void table_remove(tracked_t *e) {
    if (LIKELY(g_table[((size_t)(e - g_table) + 1) & g_table_mask].ptr == 0)) {
        e->ptr = 0;
        g_table_count--;
    } else {
        table_remove_shift(e);
    }
}

/* Remove p; 1 and its packed value when it was tracked.  Caller holds the local lock. */
static inline int table_take_locked(CUdeviceptr p, uint64_t *packed) {
    if (UNLIKELY(p == 0)) return 0;
    tracked_t *e = table_find(p);
    if (!e) return 0;
    *packed = e->packed;
    table_remove(e);
    return 1;
}

static inline __attribute__((always_inline)) int table_put(CUdeviceptr p, uint64_t bytes, int card) {
    int locked = local_lock();
    int rc = table_put_locked(p, bytes, card);
    local_unlock(locked);
    return rc;
}

static void table_forget_all(void) {
    if (g_table != g_table_none) free(g_table);
    g_table = g_table_none;
    g_table_mask = 1;
    g_table_count = g_table_grow_at = 0;
    g_table_shift = 63;
    g_table_lock = 0;
}

/* ---- allocation accounting --------------------------------------------------------- */

/* Container card of every allocation when the process sees exactly one CUDA device
 * (the common gpushare case: no need to ask the driver for the current context on
 * each call); -1 when it sees several (ask per call), -2 before it is known. */
static int g_only_card = -2;

static __attribute__((noinline)) int find_only_card(void) {
    int n = 0;
    if (!real_cuDeviceGetCount || real_cuDeviceGetCount(&n) != CUDA_SUCCESS) return -1; /* not yet: ask per call */
    int card = n == 1 ? card_of(0) : -1;
    __atomic_store_n(&g_only_card, card >= 0 ? card : -1, __ATOMIC_RELAXED);
    return card;
}

/* Reserve bytes on the current context's card.  CUDA_SUCCESS with *card = -1 means
 * "not limited, just forward"; an error code means "answer this without calling".
 * Without a current context the driver refuses the call itself (and a reservation
 * made for it is given back by settle). */
static inline CUresult reserve_current(uint64_t bytes, int *card_out) {
    *card_out = -1;
    int card = __atomic_load_n(&g_only_card, __ATOMIC_RELAXED);
    if (UNLIKELY(card < 0)) {
        if (card == -2) card = find_only_card();
        if (card < 0) {
            CUdevice dev;
            if (!real_cuCtxGetDevice || real_cuCtxGetDevice(&dev) != CUDA_SUCCESS) return CUDA_SUCCESS;
            card = card_of(dev);
            if (card < 0) {
                report_unmapped(dev);
                return CUDA_ERROR_INVALID_DEVICE;
            }
        }
    }
    uint64_t limit = g_limit[card];
    if (!limit || bytes == 0) return CUDA_SUCCESS; /* unlimited card; 0 bytes: the driver's own error */
    if (usage_reserve(card, bytes, limit) != 0 && (!shim_pools_settle() || usage_reserve(card, bytes, limit) != 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *card_out = card;
    return CUDA_SUCCESS;
}

static inline void settle(int card, uint64_t bytes, CUresult rc, CUdeviceptr p) {
    if (card < 0) return;
    if (rc != CUDA_SUCCESS || table_put(p, bytes, card) != 0) usage_release(card, bytes);
}

static CUresult refuse_cuda(void) {
    shim_report_broken();
    return CUDA_ERROR_NOT_INITIALIZED;
}

CUresult shim_refuse_cuda(void) { return refuse_cuda(); }

int shim_card_of_device(int dev) {
    int card = card_of(dev);
    if (card < 0) report_unmapped(dev);
    return card;
}

int shim_current_card(void) {
    CUdevice dev;
    if (!real_cuCtxGetDevice || real_cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
    return shim_card_of_device(dev);
}

int shim_untrack(CUdeviceptr p, int *card, uint64_t *bytes) {
    uint64_t packed;
    int locked = local_lock();
    int tracked = table_take_locked(p, &packed);
    local_unlock(locked);
    if (!tracked) return 0;
    *card = (int)(packed & ((1u << PACK_CARD_BITS) - 1));
    *bytes = packed >> PACK_CARD_BITS;
    return 1;
}

void shim_track(CUdeviceptr p, int card, uint64_t bytes) {
    if (table_put(p, bytes, card) != 0) usage_release(card, bytes);
}

/* What the pools need of the hooks (shim_pool.h). */
const shim_pool_host_t shim_pool_host = {
    .cuda_mode = shim_cuda_mode,
    .real_cuda = shim_real_cuda,
    .refuse_cuda = shim_refuse_cuda,
    .card_of_device = shim_card_of_device,
    .current_card = shim_current_card,
    .card_limit = shim_card_limit,
    .untrack = shim_untrack,
    .track = shim_track,
};

#define REAL(idx, type) ((type)real_cuda(idx))
#define HOT_REAL(idx, type) ((type)g_real_cuda[idx]) /* after cuda_mode() */

/* ---- CUDA hooks ---------------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int Flags) {
    CUresult (*real)(unsigned int) = REAL(H_cuInit, CUresult(*)(unsigned int));
    if (mode() == SHIM_BROKEN) return refuse_cuda();
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return real(Flags);
}

static void clamp_total(size_t *bytes, CUdevice dev) {
    if (mode() != SHIM_LIMITED) return;
    uint64_t limit = limit_of(card_of(dev));
    if (limit && limit < *bytes) *bytes = (size_t)limit;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    CUresult (*real)(size_t *, CUdevice) = REAL(H_cuDeviceTotalMem_v2, CUresult(*)(size_t *, CUdevice));
    if (mode() == SHIM_BROKEN) return refuse_cuda();
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(bytes, dev);
    if (rc == CUDA_SUCCESS) clamp_total(bytes, dev);
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    CUresult (*real)(unsigned int *, CUdevice) = REAL(H_cuDeviceTotalMem, CUresult(*)(unsigned int *, CUdevice));
    if (mode() == SHIM_BROKEN) return refuse_cuda();
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(bytes, dev);
    if (rc == CUDA_SUCCESS) {
        size_t v = *bytes;
        clamp_total(&v, dev);
        *bytes = (unsigned int)v;
    }
    return rc;
}

/* Share view of (free, total) for the current context's card. */
static void share_view(size_t *free_b, size_t *total_b) {
    if (mode() != SHIM_LIMITED || !real_cuCtxGetDevice) return;
    shim_pools_settle(); /* pools a real driver shrank at a synchronisation */
    CUdevice dev;
    if (real_cuCtxGetDevice(&dev) != CUDA_SUCCESS) return;
    int card = card_of(dev);
    uint64_t limit = limit_of(card);
    if (!limit) return;
    uint64_t used = usage_of(card);
    uint64_t share_free = used < ledger_share(limit) ? ledger_share(limit) - used : 0;
    if (*total_b > limit) *total_b = (size_t)limit;
    if (*free_b > share_free) *free_b = (size_t)share_free;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    CUresult (*real)(size_t *, size_t *) = REAL(H_cuMemGetInfo_v2, CUresult(*)(size_t *, size_t *));
    if (mode() == SHIM_BROKEN) return refuse_cuda();
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(free_b, total_b);
    if (rc == CUDA_SUCCESS) share_view(free_b, total_b);
    return rc;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total_b) {
    CUresult (*real)(unsigned int *, unsigned int *) = REAL(H_cuMemGetInfo, CUresult(*)(unsigned int *, unsigned int *));
    if (mode() == SHIM_BROKEN) return refuse_cuda();
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(free_b, total_b);
    if (rc == CUDA_SUCCESS) {
        size_t f = *free_b, t = *total_b;
        share_view(&f, &t);
        *free_b = (unsigned int)f;
        *total_b = (unsigned int)t;
    }
    return rc;
}

/* The answer of an allocation hook when it does not account: refused configuration,
 * missing driver, or pass-through (forward == 1: call the real function). */
#define UNACCOUNTED(m, real, forward_call)        \
    do {                                          \
        if ((m) == SHIM_BROKEN) return refuse_cuda(); \
        if (!(real)) return CUDA_ERROR_NOT_FOUND; \
        return forward_call;                      \
    } while (0)

/* The single-card fast path: once the process has opened the ledger and is known to
 * see one CUDA device, a cuMemAlloc_v2 charges the card with no driver query and no
 * lookups.  ready = 0 sends every call down the general path (before setup, after
 * fork until the child is set up again, and at exit). */
static struct {
    int ready;
    int card;
    uint64_t limit;            /* the card's limit, at most PACK_MAX_BYTES */
    usage_own_t *own;          /* &g_usage_own[card] */
    int managed_held;          /* 0 under the fault unguarded-managed */
    CUresult (*real_free)(CUdeviceptr);
} g_fast;

static __attribute__((noinline)) void fast_path_setup(void) {
    if (UNLIKELY(g_usage_leak_frees)) return; /* fault leak-frees: every free goes through usage_release */
    int card = __atomic_load_n(&g_only_card, __ATOMIC_RELAXED);
    if (card < 0 || !g_usage_ready || !g_limit[card] || !g_real_cuda[H_cuMemAlloc_v2] || !g_real_cuda[H_cuMemFree_v2]) return;
    g_fast.real_free = (CUresult(*)(CUdeviceptr))g_real_cuda[H_cuMemFree_v2];
    g_fast.card = card;
    g_fast.limit = g_limit[card] < PACK_MAX_BYTES ? g_limit[card] : PACK_MAX_BYTES;
    g_fast.own = &g_usage_own[card];
    g_fast.managed_held = !(shim_config()->fault & SHIM_FAULT_UNGUARDED_MANAGED);
    __atomic_store_n(&g_fast.ready, 1, __ATOMIC_RELEASE);
}

/* Reserve 1..limit bytes on the fast path's card: 1 when charged. */
static inline int fast_reserve(uint64_t bytes) {
    if (UNLIKELY(bytes - 1 >= g_fast.limit)) return 0; /* 0 bytes, or more than the limit */
    usage_own_t *o = g_fast.own;
    if (LIKELY(__libc_single_threaded)) {
        uint64_t u = o->used + bytes;
        if (LIKELY(u <= o->leased)) {
            o->used = u;
            return 1;
        }
    }
    return usage_reserve(g_fast.card, bytes, g_fast.limit) == 0;
}

static __attribute__((noinline)) CUresult alloc_v2_general(CUdeviceptr *dptr, size_t bytesize) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr *, size_t) = HOT_REAL(H_cuMemAlloc_v2, CUresult(*)(CUdeviceptr *, size_t));
    if (m != SHIM_LIMITED || !real || !dptr) UNACCOUNTED(m, real, real(dptr, bytesize));
    int card;
    CUresult rc = reserve_current(bytesize, &card);
    if (rc != CUDA_SUCCESS) return rc;
    if (card >= 0 && !__atomic_load_n(&g_fast.ready, __ATOMIC_RELAXED)) fast_path_setup();
    rc = real(dptr, bytesize);
    settle(card, bytesize, rc, rc == CUDA_SUCCESS ? *dptr : 0);
    return rc;
}

static __attribute__((noinline)) CUresult settle_slow(int card, uint64_t bytes, CUresult rc, CUdeviceptr p) {
    settle(card, bytes, rc, p);
    return rc;
}

/* After a fast-path reservation of bytes and the driver's answer rc: track the
 * pointer, or give the bytes back.  Single-threaded (checked after the driver call:
 * it may have started threads) and the table has room: insert without a lock. */
static inline __attribute__((always_inline)) CUresult fast_settle(CUresult rc, CUdeviceptr *dptr, uint64_t bytes) {
    CUdeviceptr p;
    if (LIKELY(rc == CUDA_SUCCESS && __libc_single_threaded && g_table_count < g_table_grow_at && (p = *dptr))) {
        table_insert(p, bytes << PACK_CARD_BITS | (uint64_t)g_fast.card);
        return rc;
    }
    return settle_slow(g_fast.card, bytes, rc, rc == CUDA_SUCCESS ? *dptr : 0);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    if (LIKELY(__atomic_load_n(&g_fast.ready, __ATOMIC_ACQUIRE)) && LIKELY(dptr != NULL) && fast_reserve(bytesize))
        return fast_settle(((CUresult(*)(CUdeviceptr *, size_t))g_real_cuda[H_cuMemAlloc_v2])(dptr, bytesize), dptr,
                           bytesize);
    return alloc_v2_general(dptr, bytesize);
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr_v1 *, unsigned int) = HOT_REAL(H_cuMemAlloc, CUresult(*)(CUdeviceptr_v1 *, unsigned int));
    if (UNLIKELY(m != SHIM_LIMITED || !real || !dptr)) UNACCOUNTED(m, real, real(dptr, bytesize));
    int card;
    CUresult rc = reserve_current(bytesize, &card);
    if (rc != CUDA_SUCCESS) return rc;
    rc = real(dptr, bytesize);
    settle(card, bytesize, rc, rc == CUDA_SUCCESS ? (CUdeviceptr)*dptr : 0);
    return rc;
}

static __attribute__((noinline)) CUresult alloc_managed_general(CUdeviceptr *dptr, size_t bytesize,
                                                                 unsigned int flags);

/* The single-card fast path serves managed memory too (it lives on the same share). */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    if (LIKELY(__atomic_load_n(&g_fast.ready, __ATOMIC_ACQUIRE)) && LIKELY(g_fast.managed_held) &&
        LIKELY(dptr != NULL) && g_real_cuda[H_cuMemAllocManaged] && fast_reserve(bytesize))
        return fast_settle(
            ((CUresult(*)(CUdeviceptr *, size_t, unsigned int))g_real_cuda[H_cuMemAllocManaged])(dptr, bytesize, flags),
            dptr, bytesize);
    return alloc_managed_general(dptr, bytesize, flags);
}

static __attribute__((noinline)) CUresult alloc_managed_general(CUdeviceptr *dptr, size_t bytesize,
                                                                 unsigned int flags) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr *, size_t, unsigned int) =
        HOT_REAL(H_cuMemAllocManaged, CUresult(*)(CUdeviceptr *, size_t, unsigned int));
    if (m != SHIM_LIMITED || !real || !dptr) UNACCOUNTED(m, real, real(dptr, bytesize, flags));
    if (UNLIKELY(shim_config()->fault & SHIM_FAULT_UNGUARDED_MANAGED)) /* fault: this path is not held */
        return real(dptr, bytesize, flags);
    int card;
    CUresult rc = reserve_current(bytesize, &card);
    if (rc != CUDA_SUCCESS) return rc;
    if (card >= 0 && !__atomic_load_n(&g_fast.ready, __ATOMIC_RELAXED)) fast_path_setup(); /* for cuMemFree_v2 */
    rc = real(dptr, bytesize, flags);
    settle(card, bytesize, rc, rc == CUDA_SUCCESS ? *dptr : 0);
    return rc;
}

/* Pitched allocations: reserve the usual 512-byte-aligned estimate, then settle on
 * the pitch the driver chose. */
static void settle_pitch(int card, uint64_t estimate, CUresult rc, CUdeviceptr p, uint64_t actual) {
    if (card >= 0 && rc == CUDA_SUCCESS && actual != estimate) {
        if (actual > estimate)
            usage_force_reserve(card, actual - estimate); /* already allocated */
        else
            usage_release(card, estimate - actual);
        estimate = actual;
    }
    settle(card, estimate, rc, p);
}

static __attribute__((noinline)) CUresult alloc_pitch_v2_general(CUdeviceptr *dptr, size_t *pPitch,
                                                                  size_t WidthInBytes, size_t Height,
                                                                  unsigned int ElementSizeBytes);

/* The single-card fast path, when the driver's pitch matches the estimate (as it
 * does for widths that are a multiple of 512 bytes); otherwise settled on the pitch. */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                   unsigned int ElementSizeBytes) {
    uint64_t estimate;
    if (LIKELY(__atomic_load_n(&g_fast.ready, __ATOMIC_ACQUIRE)) && LIKELY(dptr != NULL && pPitch != NULL) &&
        g_real_cuda[H_cuMemAllocPitch_v2] && WidthInBytes <= PACK_MAX_BYTES && Height <= PACK_MAX_BYTES &&
        !__builtin_mul_overflow((uint64_t)((WidthInBytes + 511) & ~(size_t)511), (uint64_t)Height, &estimate) &&
        fast_reserve(estimate)) {
        CUresult rc = ((CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int))
                           g_real_cuda[H_cuMemAllocPitch_v2])(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        if (LIKELY(rc != CUDA_SUCCESS || (uint64_t)*pPitch * Height == estimate)) return fast_settle(rc, dptr, estimate);
        settle_pitch(g_fast.card, estimate, rc, *dptr, (uint64_t)*pPitch * Height);
        return rc;
    }
    return alloc_pitch_v2_general(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

static __attribute__((noinline)) CUresult alloc_pitch_v2_general(CUdeviceptr *dptr, size_t *pPitch,
                                                                  size_t WidthInBytes, size_t Height,
                                                                  unsigned int ElementSizeBytes) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int) =
        HOT_REAL(H_cuMemAllocPitch_v2, CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int));
    if (m != SHIM_LIMITED || !real || !dptr || !pPitch)
        UNACCOUNTED(m, real, real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    uint64_t estimate = (uint64_t)((WidthInBytes + 511) & ~(size_t)511) * Height;
    int card;
    CUresult rc = reserve_current(estimate, &card);
    if (rc != CUDA_SUCCESS) return rc;
    if (card >= 0 && !__atomic_load_n(&g_fast.ready, __ATOMIC_RELAXED)) fast_path_setup(); /* for cuMemFree_v2 */
    rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    settle_pitch(card, estimate, rc, rc == CUDA_SUCCESS ? *dptr : 0, rc == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
    return rc;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                unsigned int Height, unsigned int ElementSizeBytes) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int, unsigned int) = HOT_REAL(
        H_cuMemAllocPitch, CUresult(*)(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int, unsigned int));
    if (m != SHIM_LIMITED || !real || !dptr || !pPitch)
        UNACCOUNTED(m, real, real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    uint64_t estimate = (uint64_t)((WidthInBytes + 511u) & ~511u) * Height;
    int card;
    CUresult rc = reserve_current(estimate, &card);
    if (rc != CUDA_SUCCESS) return rc;
    rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    settle_pitch(card, estimate, rc, rc == CUDA_SUCCESS ? (CUdeviceptr)*dptr : 0,
                 rc == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
    return rc;
}

/* Free: forget the pointer first (so that the driver cannot hand the same address to
 * another thread before we are done with it), call the driver, then give the bytes
 * back, or track the pointer again if the driver refused. */
#define FREE_TRACKED(p, free_call)                                                          \
    do {                                                                                    \
        uint64_t packed;                                                                    \
        int locked = local_lock();                                                          \
        int tracked = table_take_locked((p), &packed);                                      \
        local_unlock(locked);                                                               \
        if (!tracked) return shim_pools_settle_after(free_call);                            \
        CUresult rc_ = free_call;                                                           \
        int card_ = (int)(packed & ((1u << PACK_CARD_BITS) - 1));                           \
        uint64_t bytes_ = packed >> PACK_CARD_BITS;                                         \
        if (LIKELY(rc_ == CUDA_SUCCESS)) usage_release(card_, bytes_);                      \
        else if (table_put((p), bytes_, card_) != 0) usage_release(card_, bytes_);          \
        return rc_;                                                                         \
    } while (0)

static __attribute__((noinline)) CUresult free_v2_general(CUdeviceptr dptr) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr) = HOT_REAL(H_cuMemFree_v2, CUresult(*)(CUdeviceptr));
    if (m != SHIM_LIMITED || !real) UNACCOUNTED(m, real, real(dptr));
    FREE_TRACKED(dptr, real(dptr));
}

/* The driver refused to free a tracked pointer: it still holds the memory. */
static __attribute__((noinline)) CUresult free_refused(CUdeviceptr p, uint64_t packed, CUresult rc) {
    int card = (int)(packed & ((1u << PACK_CARD_BITS) - 1));
    if (table_put(p, packed >> PACK_CARD_BITS, card) != 0) usage_release(card, packed >> PACK_CARD_BITS);
    return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    tracked_t *e;
    if (LIKELY(__atomic_load_n(&g_fast.ready, __ATOMIC_ACQUIRE)) && LIKELY(__libc_single_threaded) && LIKELY(dptr != 0) &&
        LIKELY((e = table_find(dptr)) != NULL)) {
        /* Single-card fast path, single-threaded: every entry is on g_fast.card. */
        uint64_t packed = e->packed;
        table_remove(e);
        CUresult rc = g_fast.real_free(dptr);
        if (LIKELY(rc == CUDA_SUCCESS)) {
            usage_release_one_thread(g_fast.own, packed >> PACK_CARD_BITS);
            return rc;
        }
        return free_refused(dptr, packed, rc);
    }
    return free_v2_general(dptr);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    shim_mode_t m = cuda_mode();
    CUresult (*real)(CUdeviceptr_v1) = HOT_REAL(H_cuMemFree, CUresult(*)(CUdeviceptr_v1));
    if (m != SHIM_LIMITED || !real) UNACCOUNTED(m, real, real(dptr));
    FREE_TRACKED((CUdeviceptr)dptr, real(dptr));
}
/* Swap any real entry point the driver hands out for our hook of it. */
static void replace_with_hook(void **pfn) {
    if (!pfn || !*pfn || mode() == SHIM_PASSTHROUGH) return;
    for (int i = 0; i < H_CUDA_COUNT; i++)
        if (*pfn == g_real_cuda[i]) {
            *pfn = CUDA_HOOK_FNS[i];
            return;
        }
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus) {
    CUresult (*real)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        REAL(H_cuGetProcAddress_v2, CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *));
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS) replace_with_hook(pfn);
    return rc;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    CUresult (*real)(const char *, void **, int, cuuint64_t) =
        REAL(H_cuGetProcAddress, CUresult(*)(const char *, void **, int, cuuint64_t));
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS) replace_with_hook(pfn);
    return rc;
}

/* ---- NVML hooks ------------------------------------------------------------------- */

static nvmlReturn_t refuse_nvml(void) {
    shim_report_broken();
    return NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    nvmlReturn_t (*real)(void) = (nvmlReturn_t(*)(void))real_nvml(H_nvmlInit_v2);
    if (mode() == SHIM_BROKEN) return refuse_nvml();
    return real ? real() : NVML_ERROR_FUNCTION_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlInit(void) {
    nvmlReturn_t (*real)(void) = (nvmlReturn_t(*)(void))real_nvml(H_nvmlInit);
    if (mode() == SHIM_BROKEN) return refuse_nvml();
    return real ? real() : NVML_ERROR_FUNCTION_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    nvmlReturn_t (*real)(unsigned int) = (nvmlReturn_t(*)(unsigned int))real_nvml(H_nvmlInitWithFlags);
    if (mode() == SHIM_BROKEN) return refuse_nvml();
    return real ? real(flags) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

/* Share view of an NVML device: (limit, container usage), 0 limit = untouched. */
static uint64_t nvml_share(nvmlDevice_t device, uint64_t *used) {
    if (mode() != SHIM_LIMITED || !real_nvmlDeviceGetIndex) return 0;
    unsigned int index;
    if (real_nvmlDeviceGetIndex(device, &index) != NVML_SUCCESS || index >= SHIM_MAX_DEVICES) return 0;
    uint64_t limit = limit_of((int)index);
    if (limit) *used = UNLIKELY(shim_config()->fault & SHIM_FAULT_SMI_IGNORES_USAGE) ? 0 : usage_of((int)index);
    return limit;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_t *) =
        (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))real_nvml(H_nvmlDeviceGetMemoryInfo);
    if (mode() == SHIM_BROKEN) return NVML_ERROR_UNINITIALIZED;
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    uint64_t used = 0, limit;
    if (rc == NVML_SUCCESS && (limit = nvml_share(device, &used)) != 0) {
        uint64_t total = memory->total < limit ? memory->total : limit;
        uint64_t share_free = used < total ? total - used : 0;
        memory->total = total;
        memory->free = memory->free < share_free ? memory->free : share_free;
        memory->used = total - memory->free;
    }
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_v2_t *) =
        (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *))real_nvml(H_nvmlDeviceGetMemoryInfo_v2);
    if (mode() == SHIM_BROKEN) return NVML_ERROR_UNINITIALIZED;
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    uint64_t used = 0, limit;
    if (rc == NVML_SUCCESS && (limit = nvml_share(device, &used)) != 0) {
        uint64_t total = memory->total < limit ? memory->total : limit;
        if (used > total) used = total;
        uint64_t share_free = total - used;
        memory->total = total;
        memory->used = used;
        memory->free = memory->free < share_free ? memory->free : share_free;
        memory->reserved = total - used - memory->free; /* total = reserved + used + free */
    }
    return rc;
}

/* ---- process lifecycle ---------------------------------------------------------- */

static void after_fork_in_child(void) {
    g_fast.ready = 0;
    table_forget_all(); /* CUDA state does not survive fork */
    shim_pools_forget();
    usage_forget_process();
}

__attribute__((constructor)) static void shim_start(void) {
    resolve_real_dlsym();
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

__attribute__((destructor)) static void shim_stop(void) {
    __atomic_store_n(&g_fast.ready, 0, __ATOMIC_RELEASE);
    usage_exit();
}
