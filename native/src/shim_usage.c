/* Container-wide accounting of device memory: the ledger of byte-range locks on
 * GPUSHARE_USAGE_FILE (the scheme and why it holds: shim.h).  This file holds the slow
 * paths: opening the ledger, locking and unlocking units, counting the units the other
 * processes hold.  The fast paths (a charge within the units this process holds) are
 * the inline functions in shim.h. */
#include "shim_usage.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

usage_own_t g_usage_own[SHIM_MAX_DEVICES];
int g_usage_ready;
int g_usage_leak_frees;

/* The units this process holds on one card: sorted, disjoint, merged [start, end) in
 * ledger offsets (in the card's range, then its overflow). */
typedef struct {
    uint64_t start, end;
} span_t;

typedef struct {
    span_t *spans;
    size_t count, room;
} held_t;

static held_t g_held[SHIM_MAX_DEVICES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* every slow path */
static int g_fd = -1;
static dev_t g_dev;
static ino_t g_ino;
static int g_failed; /* the ledger cannot be used: every reservation is refused */

static void warn(const char *what) {
    char line[700];
    int n = snprintf(line, sizeof line, "gpushare-shim: usage file %s: %s: %s\n", shim_config()->usage_file, what,
                     strerror(errno));
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Say once on stderr that a fault is on, so no one mistakes the shim for a sound one. */
static void announce_fault(unsigned fault) {
    static const char *const names[] = {"per-process-budget", "leak-frees", "no-reclaim", "unguarded-managed",
                                        "exact-fit-refused", "smi-ignores-usage", "ordinal-cards", "loader-unheld",
                                        "stream-current-card", "contexts-uncharged", "vmm-release-frees",
                                        "exec-keeps-charge"};
    char line[512];
    int n = snprintf(line, sizeof line, "gpushare-shim: FAULT INJECTED: GPUSHARE_SHIM_FAULT=");
    for (unsigned i = 0; i < sizeof names / sizeof names[0] && n > 0 && (size_t)n < sizeof line; i++)
        if (fault & (1u << i)) n += snprintf(line + n, sizeof line - (size_t)n, "%s,", names[i]);
    if (n > 0 && (size_t)n < sizeof line) n += snprintf(line + n, sizeof line - (size_t)n, " (never use in production)\n");
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Fault no-reclaim: a child that holds this process's open file description, and so
 * its locks, for KEEPER_SECONDS after the process dies.  Made with a bare clone (no
 * fork handlers run) and closing every other descriptor, so it holds no pipe or
 * terminal open. */
#define KEEPER_SECONDS 120
static void start_keeper(int fd) {
    long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
    if (pid != 0) return;
    if (fd > 0) syscall(SYS_close_range, 0U, (unsigned)fd - 1, 0U);
    syscall(SYS_close_range, (unsigned)fd + 1, ~0U, 0U);
    struct timespec left = {KEEPER_SECONDS, 0};
    while (syscall(SYS_nanosleep, &left, &left) != 0) continue;
    syscall(SYS_exit_group, 0);
}

/* Open the ledger (caller holds g_lock); -1 if unusable. */
static int open_ledger(void) {
    const char *path = shim_config()->usage_file;
    unsigned fault = shim_config()->fault;
    char own[600];
    if (UNLIKELY(fault)) {
        announce_fault(fault);
        g_usage_leak_frees = (fault & SHIM_FAULT_LEAK_FREES) != 0;
        if (fault & SHIM_FAULT_PER_PROCESS_BUDGET) { /* fault: a ledger of this process's own */
            snprintf(own, sizeof own, "%s.%d", path, (int)getpid());
            path = own;
        }
    }
    /* With the limits file, the device plugin made the file (bind-mounted, so it cannot
     * be removed or replaced from the container): a missing one is tampering, never a
     * reason to start a ledger afresh. */
    int prepared = shim_config()->from_file && path != own;
    /* Never through a link (a workload could point it at any file), only a regular file. */
    /* Read-only: the ledger is read locks, so the file can be mounted read-only (a pod
     * cannot write to the node's disk through it). */
    /* Closed on exec: the kernel then drops this process's locks, so a program started
     * by exec (the same pid) holds nothing of what the one it replaced had charged.
     * Fault exec-keeps-charge leaves the descriptor open across exec: the new program
     * opens one of its own, and the old one's locks stay, charged to no one it knows. */
    int cloexec = fault & SHIM_FAULT_EXEC_KEEPS_CHARGE ? 0 : O_CLOEXEC;
    int fd = open(path, O_RDONLY | cloexec | O_NOFOLLOW | (prepared ? 0 : O_CREAT), 0600);
    if (fd < 0) { warn("cannot open"); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { warn("cannot stat"); close(fd); return -1; }
    if (!S_ISREG(st.st_mode)) { errno = EINVAL; warn("not a regular file"); close(fd); return -1; }
    /* Away from the low numbers a program reuses after closing its own files. */
    int high = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 512);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    g_fd = fd;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        uint64_t keep = ledger_share(shim_config()->limit[d] / 64);
        g_usage_own[d].keep_max = keep < LEDGER_KEEP ? keep : LEDGER_KEEP;
    }
    g_dev = st.st_dev;
    g_ino = st.st_ino;
    if (UNLIKELY(fault & SHIM_FAULT_NO_RECLAIM)) start_keeper(fd);
    return 0;
}

/* Open the ledger once per process (idempotent); -1 if unusable. */
static int attach(void) {
    if (LIKELY(__atomic_load_n(&g_usage_ready, __ATOMIC_ACQUIRE))) return 0;
    pthread_mutex_lock(&g_lock);
    if (!g_usage_ready && !g_failed) {
        if (open_ledger() == 0)
            __atomic_store_n(&g_usage_ready, 1, __ATOMIC_RELEASE);
        else
            g_failed = 1;
    }
    int rc = g_usage_ready ? 0 : -1;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* The ledger's descriptor is still the file opened (caller holds g_lock).  A process
 * that closed it has lost its locks: nothing it holds is counted any more, so no
 * further allocation is believed safe (fail closed). */
static int ledger_intact(void) {
    struct stat st;
    if (g_fd >= 0 && fstat(g_fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino) return 1;
    if (!g_failed) {
        errno = EBADF;
        warn("the ledger's descriptor was closed; refusing allocations (fail closed)");
    }
    g_failed = 1;
    __atomic_store_n(&g_usage_ready, 0, __ATOMIC_RELEASE);
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) { /* nothing is charged within locks that are gone */
        __atomic_store_n(&g_usage_own[d].leased, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&g_usage_own[d].over, 0, __ATOMIC_SEQ_CST);
    }
    return 0;
}

static int set_lock(short type, uint64_t start, uint64_t len) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)start, .l_len = (off_t)len};
    return fcntl(g_fd, F_OFD_SETLK, &fl);
}

/* A lock another open file description holds on [start, start + len): 1 and its range,
 * 0 if none, -1 on error. */
static int other_lock(uint64_t start, uint64_t len, uint64_t *cs, uint64_t *ce) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)start, .l_len = (off_t)len};
    if (fcntl(g_fd, F_OFD_GETLK, &fl) != 0) return -1;
    if (fl.l_type == F_UNLCK) return 0;
    *cs = (uint64_t)fl.l_start;
    *ce = fl.l_len ? (uint64_t)fl.l_start + (uint64_t)fl.l_len : UINT64_MAX;
    return 1;
}

/* Units the other processes hold in [lo, hi).  Their locks never overlap (write locks),
 * and F_OFD_GETLK answers one of them at a time, not necessarily the first: each answer
 * splits what is left in two. */
static uint64_t others_units(uint64_t lo, uint64_t hi) {
    span_t stack_room[64], *todo = stack_room;
    size_t n = 0, room = 64;
    uint64_t units = 0;
    todo[n++] = (span_t){lo, hi};
    while (n) {
        span_t s = todo[--n];
        uint64_t cs, ce;
        if (other_lock(s.start, s.end - s.start, &cs, &ce) != 1) continue;
        uint64_t a = cs > s.start ? cs : s.start, b = ce < s.end ? ce : s.end;
        if (b > a) units += b - a;
        if (n + 2 > room) {
            span_t *bigger = malloc(2 * room * sizeof *bigger);
            if (!bigger) break; /* an undercount only makes a process told too much free */
            memcpy(bigger, todo, n * sizeof *todo);
            if (todo != stack_room) free(todo);
            todo = bigger;
            room *= 2;
        }
        if (cs > s.start) todo[n++] = (span_t){s.start, cs};
        if (ce < s.end) todo[n++] = (span_t){ce, s.end};
    }
    if (todo != stack_room) free(todo);
    return units;
}

/* Record [start, end) as held; 0 when there is no room to (the caller unlocks it). */
static int held_add(held_t *h, uint64_t start, uint64_t end) {
    size_t i = 0;
    while (i < h->count && h->spans[i].end < start) i++;
    if (i < h->count && h->spans[i].start <= end) { /* touches spans[i] (never overlaps) */
        if (start < h->spans[i].start) h->spans[i].start = start;
        if (end > h->spans[i].end) h->spans[i].end = end;
        if (i + 1 < h->count && h->spans[i + 1].start == h->spans[i].end) {
            h->spans[i].end = h->spans[i + 1].end;
            memmove(&h->spans[i + 1], &h->spans[i + 2], (h->count - i - 2) * sizeof *h->spans);
            h->count--;
        }
        return 1;
    }
    if (h->count == h->room) {
        size_t room = h->room ? 2 * h->room : 16;
        span_t *s = realloc(h->spans, room * sizeof *s);
        if (!s) return 0;
        h->spans = s;
        h->room = room;
    }
    memmove(&h->spans[i + 1], &h->spans[i], (h->count - i) * sizeof *h->spans);
    h->spans[i] = (span_t){start, end};
    h->count++;
    return 1;
}

/* One pass of take: claim free units in [lo, hi) with read locks, then look for any
 * other lock on what was claimed (F_OFD_GETLK with a write lock reports the others'
 * read locks).  Two processes claiming the same unit cannot both keep it: each looks
 * after claiming, and the kernel orders the four operations, so the later looker sees
 * the other's claim (both may give it up: the next pass tries again).  *contended is
 * set when a claim was given up for a lock that may be gone by now. */
static uint64_t take_pass(held_t *h, uint64_t lo, uint64_t hi, uint64_t want, int *contended) {
    uint64_t got = 0, pos = lo;
    while (got < want && pos < hi) {
        size_t i = 0;
        while (i < h->count && h->spans[i].end <= pos) i++;
        if (i < h->count && h->spans[i].start <= pos) {
            pos = h->spans[i].end;
            continue;
        }
        uint64_t stop = i < h->count && h->spans[i].start < hi ? h->spans[i].start : hi;
        uint64_t len = want - got < stop - pos ? want - got : stop - pos;
        for (;;) {
            uint64_t cs, ce;
            int seen = other_lock(pos, len, &cs, &ce); /* held by another: no claim at all */
            if (seen < 0) return got;
            if (seen == 0) {
                if (set_lock(F_RDLCK, pos, len) != 0) return got;
                seen = other_lock(pos, len, &cs, &ce); /* claimed by another meanwhile? */
                if (seen != 0) {
                    set_lock(F_UNLCK, pos, len);
                    if (seen < 0) return got;
                    *contended = 1;
                } else if (!held_add(h, pos, pos + len)) { /* never a lock this process forgets */
                    set_lock(F_UNLCK, pos, len);
                    return got;
                } else {
                    got += len;
                    pos += len;
                    break;
                }
            }
            if (cs > pos) {
                len = cs - pos; /* the free units before it */
                continue;
            }
            pos = ce;
            break;
        }
    }
    return got;
}

/* Lock up to want free units in [lo, hi), skipping this process's own (they do not
 * conflict with it, so locking over them would count them twice).  Returns the number
 * locked (each recorded in h at once).  Passes again while claims raced. */
static uint64_t take(held_t *h, uint64_t lo, uint64_t hi, uint64_t want) {
    uint64_t got = 0;
    for (int pass = 0; pass < 16 && got < want; pass++) {
        int contended = 0;
        got += take_pass(h, lo, hi, want - got, &contended);
        if (!contended) break;
        sched_yield();
    }
    return got;
}

/* Unlock the n highest units this process holds in [lo, hi). */
static void give_top(held_t *h, uint64_t lo, uint64_t hi, uint64_t n) {
    for (size_t i = h->count; n && i-- > 0;) {
        span_t *s = &h->spans[i];
        if (s->start >= hi || s->end <= lo) continue;
        uint64_t k = s->end - s->start < n ? s->end - s->start : n;
        set_lock(F_UNLCK, s->end - k, k);
        s->end -= k;
        n -= k;
        if (s->end == s->start) {
            memmove(s, s + 1, (h->count - i - 1) * sizeof *s);
            h->count--;
        }
    }
}

static uint64_t card_base(int dev) { return (uint64_t)dev * LEDGER_CARD_STRIDE; }

/* Unlock what this process holds beyond its charges, past the share first (caller
 * holds g_lock).  Lowering leased races with a fast-path charge on another thread:
 * leased is lowered first and used read after it (the charge does the reverse), and
 * the shrink gives up if a charge got in. */
static void shrink_locked(int dev, uint64_t keep) {
    usage_own_t *o = &g_usage_own[dev];
    uint64_t target = ledger_round_up(__atomic_load_n(&o->used, __ATOMIC_SEQ_CST)) + keep;
    uint64_t leased = o->leased, over = o->over;
    if (leased + over <= target) return;
    uint64_t drop = leased + over - target;
    uint64_t drop_over = over < drop ? over : drop, drop_in = drop - drop_over;
    if (drop_in) {
        __atomic_store_n(&o->leased, leased - drop_in, __ATOMIC_SEQ_CST);
        if (ledger_round_up(__atomic_load_n(&o->used, __ATOMIC_SEQ_CST)) + keep > leased - drop_in + over - drop_over) {
            __atomic_store_n(&o->leased, leased, __ATOMIC_SEQ_CST);
            return;
        }
    }
    uint64_t base = card_base(dev);
    give_top(&g_held[dev], base + LEDGER_OVERFLOW, base + LEDGER_CARD_STRIDE, drop_over >> LEDGER_UNIT_SHIFT);
    give_top(&g_held[dev], base, base + LEDGER_OVERFLOW, drop_in >> LEDGER_UNIT_SHIFT);
    __atomic_store_n(&o->over, over - drop_over, __ATOMIC_SEQ_CST);
}

void usage_shrink(int dev, uint64_t keep) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || !g_usage_ready) return;
    pthread_mutex_lock(&g_lock);
    if (ledger_intact()) shrink_locked(dev, keep);
    pthread_mutex_unlock(&g_lock);
}

/* Total in use on the card (caller holds g_lock): this process's charges and the
 * units the others hold, in the share and past it. */
static uint64_t usage_locked(int dev) {
    uint64_t base = card_base(dev);
    uint64_t others = others_units(base, base + LEDGER_CARD_STRIDE);
    return __atomic_load_n(&g_usage_own[dev].used, __ATOMIC_SEQ_CST) + (others << LEDGER_UNIT_SHIFT);
}

int usage_reserve_slow(int dev, uint64_t bytes, uint64_t limit) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return -2;
    if (bytes > limit) return -1;
    usage_own_t *o = &g_usage_own[dev];
    uint64_t base = card_base(dev), share_end = base + (limit >> LEDGER_UNIT_SHIFT);
    pthread_mutex_lock(&g_lock);
    if (!ledger_intact()) {
        pthread_mutex_unlock(&g_lock);
        return -2;
    }
    int rc = -1;
    for (;;) {
        uint64_t u = __atomic_load_n(&o->used, __ATOMIC_SEQ_CST);
        uint64_t need = ledger_round_up(u + bytes);
        if (need > ledger_share(limit)) break;
        if (need > o->leased) {
            uint64_t want = (need - o->leased) >> LEDGER_UNIT_SHIFT;
            uint64_t got = take(&g_held[dev], base, share_end, want);
            __atomic_store_n(&o->leased, o->leased + (got << LEDGER_UNIT_SHIFT), __ATOMIC_SEQ_CST);
            if (got < want) break; /* the share is full: shrink_locked gives them back */
        }
        if (__atomic_compare_exchange_n(&o->used, &u, u + bytes, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            rc = 0;
            break;
        }
    }
    /* Units past the share are another process's (or this one's) forced charges: the
     * card is over its share while they are held, so nothing more is granted. */
    uint64_t cs, ce;
    if (rc == 0 && other_lock(base + LEDGER_OVERFLOW, LEDGER_CARD_STRIDE - LEDGER_OVERFLOW, &cs, &ce) == 1 &&
        usage_locked(dev) > limit) {
        __atomic_fetch_sub(&o->used, bytes, __ATOMIC_SEQ_CST);
        rc = -1;
    }
    shrink_locked(dev, 0); /* units taken for nothing, and past-the-share units now covered */
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void usage_force_reserve(int dev, uint64_t bytes) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return;
    usage_own_t *o = &g_usage_own[dev];
    uint64_t base = card_base(dev), limit = shim_config()->limit[dev];
    pthread_mutex_lock(&g_lock);
    if (ledger_intact()) {
        uint64_t need = ledger_round_up(__atomic_add_fetch(&o->used, bytes, __ATOMIC_SEQ_CST));
        if (need > o->leased + o->over) {
            uint64_t want = (need - o->leased - o->over) >> LEDGER_UNIT_SHIFT;
            uint64_t got = take(&g_held[dev], base, base + (limit >> LEDGER_UNIT_SHIFT), want);
            __atomic_store_n(&o->leased, o->leased + (got << LEDGER_UNIT_SHIFT), __ATOMIC_SEQ_CST);
            if (got < want) {
                uint64_t past = take(&g_held[dev], base + LEDGER_OVERFLOW, base + LEDGER_CARD_STRIDE, want - got);
                __atomic_store_n(&o->over, o->over + (past << LEDGER_UNIT_SHIFT), __ATOMIC_SEQ_CST);
            }
        }
    }
    pthread_mutex_unlock(&g_lock);
}

uint64_t usage_of(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return 0;
    pthread_mutex_lock(&g_lock);
    uint64_t used = ledger_intact() ? usage_locked(dev) : 0;
    pthread_mutex_unlock(&g_lock);
    return used;
}

/* After fork, in the child: it holds nothing.  Its copy of the descriptor refers to
 * the parent's open file description (and so to the parent's locks): closing it
 * leaves them with the parent; the child opens a description of its own on first use. */
void usage_forget_process(void) {
    pthread_mutex_init(&g_lock, NULL); /* another thread may have held it at fork */
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    g_failed = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        free(g_held[d].spans);
        g_held[d] = (held_t){0};
        g_usage_own[d] = (usage_own_t){0};
    }
    g_usage_ready = 0;
}

/* Nothing to give back by hand: the kernel drops the locks with the last descriptor. */
void usage_exit(void) {}
