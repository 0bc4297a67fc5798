/* The isolation shim's container-wide usage accounting (shim_usage.c): the ledger,
 * charges and releases, each process's part of the share.  Depends on the base layer
 * (shim_config.h) and libc only; it includes no hooks' header. */
#ifndef GPUSHARE_SHIM_USAGE_H
#define GPUSHARE_SHIM_USAGE_H

#include <stdint.h>
#include <sys/single_threaded.h>

#include "shim_config.h"

/* ---- container-wide usage accounting (shim_usage.c) ----------------------------------
 *
 * The ledger is the usage file, but not its bytes: it is the kernel's table of
 * open-file-description (OFD) byte-range locks on it.  Card d's share is the range of
 * offsets [d * LEDGER_CARD_STRIDE, + limit / LEDGER_UNIT): each offset is one unit of
 * LEDGER_UNIT bytes, and a process holds a unit by holding a read lock on its offset
 * that no other process holds (the file is opened read-only, and mounted so: a pod
 * cannot write through it).  So:
 *
 *   - a unit is claimed with a read lock, then F_OFD_GETLK (asking for a write lock)
 *     shows any other lock on it; a claim that finds one is given up.  Two processes
 *     claiming one unit cannot both keep it, as the kernel orders the claims and the
 *     looks, and a process can only ever claim units inside the range: the share
 *     cannot be over-committed, whatever the processes race;
 *   - only the process that holds a lock can give it back, and the kernel gives back
 *     every lock of a process that dies (SIGKILL included) or execs: nothing the
 *     container can do to the file, a pid or a counter changes what another process
 *     holds, and no dead process's memory stays counted;
 *   - a process counts the units the others hold with F_OFD_GETLK (its own locks never
 *     show there), which needs no pid and works across PID namespaces.
 *
 * Units a process holds past the share sit above the range (the overflow, from
 * LEDGER_OVERFLOW): memory a driver handed out before it could be charged.  Within
 * the process, used[d] counts the bytes charged and leased[d] the bytes of the units
 * it holds in the range; an allocation that fits in leased is charged with no system
 * call (the fast path).  Units no longer needed are unlocked at once, but for at most
 * LEDGER_KEEP (and 1/64 of the share), kept for the next allocation, so that an
 * allocate/free loop makes no system call: the other processes see what this one
 * holds, rounded up to a unit, plus at most that (2 MiB, a driver's own page). */

#define LEDGER_UNIT_SHIFT 16
#define LEDGER_UNIT ((uint64_t)1 << LEDGER_UNIT_SHIFT) /* 64 KiB */
#define LEDGER_CARD_STRIDE ((uint64_t)1 << 40)          /* offsets per card */
#define LEDGER_OVERFLOW ((uint64_t)1 << 39)             /* overflow units start here, per card */
#define LEDGER_KEEP ((uint64_t)2 << 20)                 /* kept past a free, at most */

typedef struct {
    uint64_t used;   /* bytes this process charged on the card */
    uint64_t leased; /* bytes of the units this process holds locked in the card's range */
    uint64_t over;   /* bytes of the units it holds past the share (overflow) */
    uint64_t keep_max; /* kept past a free, at most: LEDGER_KEEP, 1/64 of the share (whole units) */
    char pad[32];    /* one cache line per card */
} usage_own_t;

/* This process's charges; g_usage_ready is 0 until the ledger is open (and after fork). */
HIDDEN extern usage_own_t g_usage_own[SHIM_MAX_DEVICES];
HIDDEN extern int g_usage_ready;
/* Fault leak-frees is on (set when the process attaches). */
HIDDEN extern int g_usage_leak_frees;

/* Slow paths: open the ledger, lock more units, unlock what is no longer needed. */
HIDDEN int usage_reserve_slow(int dev, uint64_t bytes, uint64_t limit);
HIDDEN void usage_shrink(int dev, uint64_t keep);
/* Bytes in use on container card dev by all live processes of the container. */
HIDDEN uint64_t usage_of(int dev);
/* Count bytes the driver has already handed out beyond a reservation. */
HIDDEN void usage_force_reserve(int dev, uint64_t bytes);
HIDDEN void usage_forget_process(void); /* after fork, in the child */
HIDDEN void usage_exit(void);

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

static inline uint64_t ledger_round_up(uint64_t bytes) { return (bytes + LEDGER_UNIT - 1) & ~(LEDGER_UNIT - 1); }

/* What of a limit the ledger can grant: whole units. */
static inline uint64_t ledger_share(uint64_t limit) { return limit & ~(LEDGER_UNIT - 1); }

/* Reserve bytes (<= limit) on container card dev: 0 on success, -1 when the limit
 * would be exceeded, -2 when accounting is unusable.  Within the units this process
 * holds already: no system call.  With threads, a shrink may lower leased between the
 * check and the add: the add is made first and leased read again after it (both
 * sequentially consistent; usage_shrink does the reverse), so one of them backs off. */
static inline int usage_reserve(int dev, uint64_t bytes, uint64_t limit) {
    if (LIKELY(g_usage_ready && bytes <= limit)) {
        usage_own_t *o = &g_usage_own[dev];
        if (LIKELY(__libc_single_threaded)) {
            uint64_t u = o->used + bytes;
            if (LIKELY(u <= o->leased)) {
                o->used = u;
                return 0;
            }
        } else {
            uint64_t u = __atomic_load_n(&o->used, __ATOMIC_SEQ_CST);
            while (u + bytes <= __atomic_load_n(&o->leased, __ATOMIC_SEQ_CST)) {
                if (__atomic_compare_exchange_n(&o->used, &u, u + bytes, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
                    if (u + bytes <= __atomic_load_n(&o->leased, __ATOMIC_SEQ_CST)) return 0;
                    __atomic_fetch_sub(&o->used, bytes, __ATOMIC_SEQ_CST); /* lost to a shrink */
                    break;
                }
            }
        }
    }
    return usage_reserve_slow(dev, bytes, limit);
}

/* Give back bytes reserved by this process on card dev; units no longer needed are
 * unlocked at once (the slow path), so the other processes can have them, but for
 * keep (at most keep_max) kept for the next allocation. */
static inline void usage_release_keeping(int dev, uint64_t bytes, uint64_t keep) {
    if (!g_usage_ready || UNLIKELY(g_usage_leak_frees)) return;
    usage_own_t *o = &g_usage_own[dev];
    uint64_t u;
    if (LIKELY(__libc_single_threaded)) {
        u = o->used >= bytes ? o->used - bytes : 0;
        o->used = u;
    } else {
        u = __atomic_sub_fetch(&o->used, bytes, __ATOMIC_SEQ_CST);
    }
    if (ledger_round_up(u) + keep < LOAD(&o->leased) + LOAD(&o->over)) usage_shrink(dev, keep);
}

/* A free of an allocation: a page kept for the next one. */
static inline void usage_release(int dev, uint64_t bytes) {
    usage_release_keeping(dev, bytes, g_usage_own[dev].keep_max);
}

/* What a pool let go, or a context: it keeps its own slack, if any. */
static inline void usage_give_back(int dev, uint64_t bytes) { usage_release_keeping(dev, bytes, 0); }

/* usage_release for the single-card fast path: one thread, the ledger open, no fault. */
static inline void usage_release_one_thread(usage_own_t *o, uint64_t bytes) {
    uint64_t u = o->used - bytes;
    o->used = u;
    if (UNLIKELY(ledger_round_up(u) + o->keep_max < o->leased + o->over)) usage_shrink((int)(o - g_usage_own), o->keep_max);
}

#endif
