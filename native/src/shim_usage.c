/* Container-wide accounting of device memory in GPUSHARE_USAGE_FILE (layout and the
 * lock-free scheme: shim.h).  This file holds the slow paths: mapping the file,
 * taking a slot for this process, rereading the other processes' released counters,
 * and reclaiming the slots of processes that died (SIGKILL leaves a slot behind; the
 * next process that needs room, or reads the usage, finds the pid dead and gives its
 * memory back). */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

usage_file_t *g_usage_file;
usage_slot_t *g_usage_me;
uint64_t g_usage_others_released[SHIM_MAX_DEVICES];
int g_usage_leak_frees;

static pid_t g_pid; /* the pid that owns g_usage_me */
static pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_open_failed;

static void warn(const char *what) {
    char line[700];
    int n = snprintf(line, sizeof line, "gpushare-shim: usage file %s: %s: %s\n", shim_config()->usage_file, what,
                     strerror(errno));
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Start time of pid in clock ticks since boot, 0 if the process does not exist. */
static uint64_t start_time_of(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may hold spaces */
    if (!p) return 0;
    unsigned long long st = 0;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime stime cutime cstime priority nice threads itrealvalue starttime(22) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st) != 1)
        return 0;
    return st;
}

static int slot_is_dead(const usage_slot_t *s) {
    if (s->pid <= 0) return 0;
    if (UNLIKELY(shim_config()->fault & SHIM_FAULT_NO_RECLAIM)) return 0; /* fault: the dead keep their memory */
    if (kill(s->pid, 0) != 0 && errno == ESRCH) return 1;
    uint64_t st = start_time_of(s->pid);
    return st != 0 && s->start_time != 0 && st != s->start_time; /* pid reused */
}

/* No lock state needs repair when a holder dies: every step of a reclaim is an
 * idempotent store (see clear_slot), so the next holder just carries on. */
static void lock_file(void) {
    if (pthread_mutex_lock(&g_usage_file->lock) == EOWNERDEAD) pthread_mutex_consistent(&g_usage_file->lock);
}

static void unlock_file(void) { pthread_mutex_unlock(&g_usage_file->lock); }

/* Give back everything slot s holds (caller holds the lock): released := reserved
 * never lowers a counter, and repeating it changes nothing. */
static void clear_slot(usage_slot_t *s) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) __atomic_store_n(&s->released[d], LOAD(&s->reserved[d]), __ATOMIC_RELEASE);
    s->start_time = 0;
    __atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
}

/* Give back the memory of dead processes; caller holds the lock. */
static void reclaim_dead(void) {
    for (int i = 0; i < USAGE_SLOTS; i++) {
        usage_slot_t *s = &g_usage_file->slot[i];
        if (s != g_usage_me && slot_is_dead(s)) clear_slot(s);
    }
}

/* Say once on stderr that a fault is on, so no one mistakes the shim for a sound one. */
static void announce_fault(unsigned fault) {
    char line[256];
    int n = snprintf(line, sizeof line, "gpushare-shim: FAULT INJECTED: GPUSHARE_SHIM_FAULT=%s%s%s%s%s%s%s (never use in production)\n",
                     fault & SHIM_FAULT_PER_PROCESS_BUDGET ? "per-process-budget," : "",
                     fault & SHIM_FAULT_LEAK_FREES ? "leak-frees," : "", fault & SHIM_FAULT_NO_RECLAIM ? "no-reclaim," : "",
                     fault & SHIM_FAULT_UNGUARDED_MANAGED ? "unguarded-managed," : "",
                     fault & SHIM_FAULT_EXACT_FIT_REFUSED ? "exact-fit-refused," : "",
                     fault & SHIM_FAULT_SMI_IGNORES_USAGE ? "smi-ignores-usage," : "",
                     fault & SHIM_FAULT_ORDINAL_CARDS ? "ordinal-cards," : "");
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

static int open_file(void) {
    const char *path = shim_config()->usage_file;
    unsigned fault = shim_config()->fault;
    char own[600];
    if (UNLIKELY(fault)) {
        announce_fault(fault);
        g_usage_leak_frees = (fault & SHIM_FAULT_LEAK_FREES) != 0;
        if (fault & SHIM_FAULT_PER_PROCESS_BUDGET) { /* fault: a usage file of this process's own */
            snprintf(own, sizeof own, "%s.%d", path, (int)getpid());
            path = own;
        }
    }
    /* With the limits file, the device plugin made the usage file (a header marked
     * USAGE_VERSION_PREPARED, bind-mounted so it cannot be unlinked): a missing, empty or
     * zeroed one is tampering, never a reason to start counting afresh. */
    int prepared = shim_config()->from_file && path != own;
    /* Never through a link (a workload could point it at any file), only a regular file,
     * and readable by the container's processes alone. */
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (prepared ? 0 : O_CREAT), 0600);
    if (fd < 0) { warn("cannot open"); return -1; }
    if (flock(fd, LOCK_EX) != 0) { warn("cannot lock"); close(fd); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { warn("cannot stat"); close(fd); return -1; }
    if (!S_ISREG(st.st_mode)) { errno = EINVAL; warn("not a regular file"); close(fd); return -1; }
    int fresh = 0; /* this process made the file: only then may it write a new header */
    if ((size_t)st.st_size < sizeof(usage_file_t)) {
        if (st.st_size != 0 || prepared) { errno = EPROTO; warn("truncated (not written by this shim)"); close(fd); return -1; }
        if (ftruncate(fd, (off_t)sizeof(usage_file_t)) != 0) { warn("cannot size"); close(fd); return -1; }
        fresh = 1;
    }
    usage_file_t *f = mmap(NULL, sizeof(usage_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED) { warn("cannot map"); close(fd); return -1; }
    if (f->magic != USAGE_MAGIC && !fresh) {
        /* A full-size file without the header: overwritten by someone (zeroing it would
         * forget what live processes hold), so no allocation is believed safe. */
        errno = EPROTO;
        warn("header overwritten; refusing allocations (fail closed)");
        munmap(f, sizeof *f);
        close(fd);
        return -1;
    }
    if (f->magic == USAGE_MAGIC && f->version == USAGE_VERSION_PREPARED && f->slots == USAGE_SLOTS &&
        f->devices == SHIM_MAX_DEVICES) {
        /* The plugin's header: the first process makes the lock, under the flock. */
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&f->lock, &a);
        pthread_mutexattr_destroy(&a);
        __atomic_store_n(&f->version, USAGE_VERSION, __ATOMIC_RELEASE);
    } else if (f->magic != USAGE_MAGIC) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        memset(f, 0, sizeof *f);
        pthread_mutex_init(&f->lock, &a);
        pthread_mutexattr_destroy(&a);
        f->version = USAGE_VERSION;
        f->slots = USAGE_SLOTS;
        f->devices = SHIM_MAX_DEVICES;
        __atomic_store_n(&f->magic, USAGE_MAGIC, __ATOMIC_RELEASE);
    } else if (f->version != USAGE_VERSION || f->slots != USAGE_SLOTS || f->devices != SHIM_MAX_DEVICES) {
        errno = EPROTO;
        warn("written by an incompatible shim version");
        munmap(f, sizeof *f);
        close(fd);
        return -1;
    }
    flock(fd, LOCK_UN);
    close(fd);
    g_usage_file = f;
    return 0;
}

/* Sum of the other slots' released[dev]: a lower bound of its current value.  What is
 * read is checked (the file is writable by the container's processes): a slot's
 * released is believed only up to its reserved (read after it, so an honest slot always
 * passes), so a forged counter cannot make room beyond the share. */
static uint64_t others_released(int dev) {
    uint64_t sum = 0;
    for (int i = 0; i < USAGE_SLOTS; i++) {
        usage_slot_t *s = &g_usage_file->slot[i];
        if (s == g_usage_me) continue;
        uint64_t released = __atomic_load_n(&s->released[dev], __ATOMIC_ACQUIRE);
        uint64_t reserved = __atomic_load_n(&s->reserved[dev], __ATOMIC_ACQUIRE);
        sum += reserved - released > (UINT64_MAX >> 1) ? reserved : released;
    }
    return sum;
}

static void refresh_others(int dev) { __atomic_store_n(&g_usage_others_released[dev], others_released(dev), __ATOMIC_RELAXED); }

/* Map the file and take a slot for this process (idempotent); -1 if unusable. */
static int attach(void) {
    if (__atomic_load_n(&g_usage_me, __ATOMIC_ACQUIRE)) return 0;
    pid_t pid = getpid();
    pthread_mutex_lock(&g_open_lock);
    int rc = 0;
    if (!g_usage_file && !g_open_failed && open_file() != 0) g_open_failed = 1;
    if (!g_usage_file) {
        rc = -1;
    } else if (!g_usage_me) {
        uint64_t start = start_time_of(pid);
        lock_file();
        usage_slot_t *free_slot = NULL;
        for (int i = 0; i < USAGE_SLOTS; i++) {
            usage_slot_t *s = &g_usage_file->slot[i];
            if (s->pid == pid || slot_is_dead(s)) clear_slot(s); /* same pid: left before an exec */
            if (s->pid == 0 && !free_slot) free_slot = s;
        }
        if (free_slot) {
            /* The slot's counters carry on from their values: reserved == released. */
            free_slot->start_time = start;
            __atomic_store_n(&free_slot->pid, pid, __ATOMIC_RELEASE);
            g_pid = pid;
            for (int d = 0; d < SHIM_MAX_DEVICES; d++) g_usage_others_released[d] = 0;
            __atomic_store_n(&g_usage_me, free_slot, __ATOMIC_RELEASE);
        } else {
            rc = -1;
        }
        unlock_file();
        if (rc != 0) {
            errno = ENOSPC;
            warn("no free process slot");
        }
    }
    pthread_mutex_unlock(&g_open_lock);
    return rc;
}

/* One compare-and-swap attempt loop against the cached lower bound of released. */
static int try_reserve(int dev, uint64_t bytes, uint64_t limit) {
    uint64_t *total = &g_usage_file->reserved[dev].bytes;
    uint64_t released = LOAD(&g_usage_others_released[dev]) + LOAD(&g_usage_me->released[dev]);
    uint64_t cur = LOAD(total);
    while (cur - released <= limit - bytes)
        if (__atomic_compare_exchange_n(total, &cur, cur + bytes, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            usage_own_add(&g_usage_me->reserved[dev], bytes);
            return 0;
        }
    return -1;
}

int usage_reserve_slow(int dev, uint64_t bytes, uint64_t limit) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return -2;
    if (bytes > limit) return -1;
    if (try_reserve(dev, bytes, limit) == 0) return 0;
    refresh_others(dev); /* others may have freed since the cached sum was read */
    if (try_reserve(dev, bytes, limit) == 0) return 0;
    lock_file();
    reclaim_dead();
    unlock_file();
    refresh_others(dev);
    return try_reserve(dev, bytes, limit);
}

uint64_t usage_of(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return 0;
    lock_file();
    reclaim_dead();
    unlock_file();
    /* Released counters first: a reservation made meanwhile can only add to the
     * answer, never make it negative. */
    uint64_t released = __atomic_load_n(&g_usage_me->released[dev], __ATOMIC_ACQUIRE) + others_released(dev);
    uint64_t used = __atomic_load_n(&g_usage_file->reserved[dev].bytes, __ATOMIC_ACQUIRE) - released;
    return used > (UINT64_MAX >> 1) ? 0 : used;
}

void usage_forget_process(void) {
    pthread_mutex_init(&g_open_lock, NULL); /* another thread may have held it at fork */
    g_usage_me = NULL; /* the child takes its own slot on first use; the parent keeps its own */
}

void usage_exit(void) {
    usage_slot_t *me = g_usage_me;
    if (!g_usage_file || !me || g_pid != getpid()) return;
    lock_file();
    clear_slot(me);
    unlock_file();
    g_usage_me = NULL;
}
