/* Internal interfaces of the isolation shim (libgpushare-shim.so). */
#ifndef GPUSHARE_SHIM_H
#define GPUSHARE_SHIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/single_threaded.h>

#define SHIM_MAX_DEVICES 64
#define HIDDEN __attribute__((visibility("hidden")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef enum {
    SHIM_PASSTHROUGH = 0, /* no limit variable set: forward everything untouched */
    SHIM_LIMITED = 1,     /* at least one limit in force */
    SHIM_BROKEN = 2,      /* malformed configuration: every CUDA/NVML call fails */
} shim_mode_t;

/* Deliberate faults (GPUSHARE_SHIM_FAULT, set only by the device plugin under --fault;
 * gpushare_stack/faults.py): each breaks one rule so the suite can show it notices. */
#define SHIM_FAULT_PER_PROCESS_BUDGET 1u /* each process gets its own usage file */
#define SHIM_FAULT_LEAK_FREES 2u         /* frees are never credited back */
#define SHIM_FAULT_NO_RECLAIM 4u         /* dead processes keep their memory */
#define SHIM_FAULT_UNGUARDED_MANAGED 8u  /* cuMemAllocManaged is passed through unaccounted */
#define SHIM_FAULT_EXACT_FIT_REFUSED 16u /* an allocation that fills the share to the byte is refused */
#define SHIM_FAULT_SMI_IGNORES_USAGE 32u /* NVML (nvidia-smi) shows the share free whatever is held */
#define SHIM_FAULT_ORDINAL_CARDS 64u     /* a CUDA ordinal is charged as that container card (CUDA_VISIBLE_DEVICES ignored) */
#define SHIM_FAULT_LOADER_UNHELD 128u    /* dlopen keeps RTLD_DEEPBIND, dlmopen opens new namespaces */
#define SHIM_FAULT_STREAM_CURRENT_CARD 256u /* a stream-ordered allocation is charged to the current card */
#define SHIM_FAULT_CONTEXTS_UNCHARGED 512u  /* CUDA contexts cost the share nothing */

/* The limit of a card the configuration gives none once any limit is given: a share of
 * one byte, so every allocation on it fails (fail closed, never "unlimited"). */
#define SHIM_REFUSED_LIMIT 1u

typedef struct {
    shim_mode_t mode;
    int from_file; /* read from the limits file the device plugin mounts (env ignored) */
    unsigned fault; /* SHIM_FAULT_* bits; 0 = a sound shim */
    uint64_t limit[SHIM_MAX_DEVICES]; /* bytes; 0 = no limit for this container card */
    char usage_file[512];
    char error[512]; /* why the configuration was refused (mode == SHIM_BROKEN) */
} shim_config_t;

/* Parse "4GiB", "4096MiB", "4096m", "1073741824B": bytes, or 0 with why set. */
HIDDEN uint64_t shim_parse_size(const char *value, const char **why);

/* Build the configuration from an environment (envp NULL-terminated). */
HIDDEN void shim_config_from_env(char *const *envp, shim_config_t *cfg);

/* The process-wide configuration, parsed once. */
HIDDEN const shim_config_t *shim_config(void);

/* Report a refused configuration on stderr, once per process. */
HIDDEN void shim_report_broken(void);

/* ---- container-wide usage accounting (shim_usage.c) ----------------------------------
 *
 * The usage file is shared by every process of a container.  All counters are
 * monotonic byte counts modulo 2^64, so that the hot path needs no lock:
 *
 *   reserved[d]            every reservation ever made on card d (atomic CAS; the only
 *                          word processes contend on)
 *   slot[s].reserved[d]    what process s reserved, slot[s].released[d] what it gave
 *                          back: written only by process s (plain stores)
 *
 *   usage[d] = reserved[d] - sum over slots of slot[s].released[d]
 *
 * A dead process's slot is reclaimed (under the robust mutex, which also guards slot
 * ownership) by setting released := reserved, an idempotent store that never lowers
 * a counter.  Because no released counter ever decreases, any sum of them read at
 * any time is a lower bound of the current one: a reservation checks against a
 * cached sum of the other processes' released counters (plus its own, read live),
 * which can only overstate the usage, and rereads the sum only when the check fails.
 * The compare-and-swap on reserved[d] is the single point that orders racing
 * reservations, so they never together exceed the limit.  A process killed in the
 * few instructions between that compare-and-swap and the store to its own reserved
 * counter leaves those bytes counted for good: the safe direction (never an
 * over-commit).  The counters wrap modulo 2^64, which is harmless unless the other
 * processes release 16 EiB between two rereads of their sum. */

#define USAGE_MAGIC 0x47505553u /* "GPUS" */
#define USAGE_VERSION 2u
#define USAGE_SLOTS 256
/* A header the device plugin wrote (magic, this version with the top bit set, slots,
 * devices, then zeros; gpushare_stack/deviceplugin/container_files.py): the first shim
 * process initializes the lock and stores USAGE_VERSION. */
#define USAGE_VERSION_PREPARED (USAGE_VERSION | 0x80000000u)

typedef struct {
    int32_t pid; /* 0 = free */
    uint32_t unused;
    uint64_t start_time;                /* /proc/<pid>/stat field 22: tells a reused pid apart */
    uint64_t reserved[SHIM_MAX_DEVICES]; /* written by the owner only */
    uint64_t released[SHIM_MAX_DEVICES]; /* written by the owner, or set to reserved on reclaim */
} __attribute__((aligned(64))) usage_slot_t;

typedef struct {
    uint64_t bytes;
    char pad[56]; /* one cache line per card: cards do not contend with each other */
} usage_counter_t;

typedef struct {
    uint32_t magic, version, slots, devices;
    pthread_mutex_t lock; /* robust, process-shared: slot ownership and reclaim */
    usage_counter_t reserved[SHIM_MAX_DEVICES] __attribute__((aligned(64)));
    usage_slot_t slot[USAGE_SLOTS];
} usage_file_t;

/* This process's view; g_usage_me is NULL until attached (and again after fork). */
HIDDEN extern usage_file_t *g_usage_file;
HIDDEN extern usage_slot_t *g_usage_me;
/* Cached lower bound of the sum of the other slots' released[d]. */
HIDDEN extern uint64_t g_usage_others_released[SHIM_MAX_DEVICES];
/* Fault leak-frees is on (set when the process attaches). */
HIDDEN extern int g_usage_leak_frees;

/* Slow paths: attach, reread the others' sum, reclaim dead processes. */
HIDDEN int usage_reserve_slow(int dev, uint64_t bytes, uint64_t limit);
/* Bytes in use on container card dev by all live processes of the container. */
HIDDEN uint64_t usage_of(int dev);
HIDDEN void usage_forget_process(void); /* after fork, in the child */
HIDDEN void usage_exit(void);

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* Add to one of this process's own counters.  Only this process writes them; while it
 * has a single thread a plain load and store suffice (nobody else can be inside the
 * shim), otherwise the threads need an atomic add. */
static inline void usage_own_add(uint64_t *counter, uint64_t v) {
    if (LIKELY(__libc_single_threaded))
        __atomic_store_n(counter, LOAD(counter) + v, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(counter, v, __ATOMIC_RELAXED);
}

/* Reserve bytes (<= limit) on container card dev: 0 on success, -1 when the limit
 * would be exceeded (after reclaiming dead processes), -2 when accounting is unusable. */
static inline int usage_reserve(int dev, uint64_t bytes, uint64_t limit) {
    usage_slot_t *me = g_usage_me;
    if (LIKELY(me != NULL && bytes <= limit)) {
        uint64_t *total = &g_usage_file->reserved[dev].bytes;
        uint64_t released = LOAD(&g_usage_others_released[dev]) + LOAD(&me->released[dev]);
        uint64_t cur = LOAD(total);
        while (cur - released <= limit - bytes) { /* usage (an upper bound) + bytes <= limit */
            if (__atomic_compare_exchange_n(total, &cur, cur + bytes, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                usage_own_add(&me->reserved[dev], bytes);
                return 0;
            }
        }
    }
    return usage_reserve_slow(dev, bytes, limit);
}

/* Count bytes the driver has already handed out beyond a reservation. */
static inline void usage_force_reserve(int dev, uint64_t bytes) {
    usage_slot_t *me = g_usage_me;
    if (!me) return;
    __atomic_fetch_add(&g_usage_file->reserved[dev].bytes, bytes, __ATOMIC_RELAXED);
    usage_own_add(&me->reserved[dev], bytes);
}

/* Give back bytes reserved by this process on card dev. */
static inline void usage_release(int dev, uint64_t bytes) {
    usage_slot_t *me = g_usage_me;
    if (me && LIKELY(!g_usage_leak_frees)) usage_own_add(&me->released[dev], bytes);
}

#endif
