/* Container-wide accounting of device memory in GPUSHARE_USAGE_FILE: an mmap'ed file
 * with one slot per process (pid + start time) under a robust process-shared mutex.
 * A process killed with SIGKILL leaves its slot behind; the next process that needs
 * room (or reads the usage) finds the pid dead and gives the memory back. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define USAGE_MAGIC 0x47505553u /* "GPUS" */
#define USAGE_VERSION 1u
#define USAGE_SLOTS 256

typedef struct {
    int32_t pid; /* 0 = free */
    uint32_t reserved;
    uint64_t start_time; /* /proc/<pid>/stat field 22: tells a reused pid apart */
    uint64_t used[SHIM_MAX_DEVICES];
} usage_slot_t;

typedef struct {
    uint32_t magic, version, slots, devices;
    pthread_mutex_t lock; /* robust, process-shared */
    uint64_t total[SHIM_MAX_DEVICES];
    usage_slot_t slot[USAGE_SLOTS];
} usage_file_t;

static usage_file_t *g_file;
static int g_slot = -1;
static pid_t g_pid;
static uint64_t g_start_time;
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
    if (kill(s->pid, 0) != 0 && errno == ESRCH) return 1;
    uint64_t st = start_time_of(s->pid);
    return st != 0 && s->start_time != 0 && st != s->start_time; /* pid reused */
}

static void recompute_totals(void) {
    memset(g_file->total, 0, sizeof g_file->total);
    for (int i = 0; i < USAGE_SLOTS; i++)
        if (g_file->slot[i].pid > 0)
            for (int d = 0; d < SHIM_MAX_DEVICES; d++) g_file->total[d] += g_file->slot[i].used[d];
}

static void lock_file(void) {
    int rc = pthread_mutex_lock(&g_file->lock);
    if (rc == EOWNERDEAD) { /* the holder died mid-update: rebuild totals from the slots */
        recompute_totals();
        pthread_mutex_consistent(&g_file->lock);
    }
}

static void unlock_file(void) { pthread_mutex_unlock(&g_file->lock); }

static void clear_slot(int i) {
    usage_slot_t *s = &g_file->slot[i];
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        g_file->total[d] -= s->used[d] <= g_file->total[d] ? s->used[d] : g_file->total[d];
        s->used[d] = 0;
    }
    s->pid = 0;
    s->start_time = 0;
}

/* Give back the memory of dead processes; caller holds the lock. */
static void reclaim_dead(void) {
    for (int i = 0; i < USAGE_SLOTS; i++)
        if (i != g_slot && slot_is_dead(&g_file->slot[i])) clear_slot(i);
}

static int open_file(void) {
    const char *path = shim_config()->usage_file;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) { warn("cannot open"); return -1; }
    if (flock(fd, LOCK_EX) != 0) { warn("cannot lock"); close(fd); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { warn("cannot stat"); close(fd); return -1; }
    if ((size_t)st.st_size < sizeof(usage_file_t)) {
        (void)fchmod(fd, 0666); /* every user of the container shares it */
        if (ftruncate(fd, (off_t)sizeof(usage_file_t)) != 0) { warn("cannot size"); close(fd); return -1; }
    }
    usage_file_t *f = mmap(NULL, sizeof(usage_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED) { warn("cannot map"); close(fd); return -1; }
    if (f->magic != USAGE_MAGIC) {
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
    g_file = f;
    return 0;
}

/* Map the file and take a slot for this process (idempotent); -1 if unusable. */
static int attach(void) {
    /* Hot path: no getpid() system call; fork resets g_slot (usage_forget_process). */
    if (__atomic_load_n(&g_slot, __ATOMIC_ACQUIRE) >= 0) return 0;
    pid_t pid = getpid();
    pthread_mutex_lock(&g_open_lock);
    int rc = 0;
    if (!g_file && !g_open_failed && open_file() != 0) g_open_failed = 1;
    if (!g_file) {
        rc = -1;
    } else if (g_slot < 0) {
        g_pid = pid;
        g_start_time = start_time_of(pid);
        lock_file();
        int free_slot = -1;
        for (int i = 0; i < USAGE_SLOTS; i++) {
            usage_slot_t *s = &g_file->slot[i];
            if (s->pid == pid) clear_slot(i); /* left by this pid before an exec */
            else if (slot_is_dead(s)) clear_slot(i);
            if (s->pid == 0 && free_slot < 0) free_slot = i;
        }
        if (free_slot >= 0) {
            g_file->slot[free_slot].pid = pid;
            g_file->slot[free_slot].start_time = g_start_time;
            __atomic_store_n(&g_slot, free_slot, __ATOMIC_RELEASE);
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

int usage_reserve(int dev, uint64_t bytes, uint64_t limit) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return -2;
    lock_file();
    int rc = 0;
    if (g_file->total[dev] + bytes > limit || g_file->total[dev] + bytes < bytes) {
        reclaim_dead();
        if (g_file->total[dev] + bytes > limit || g_file->total[dev] + bytes < bytes) rc = -1;
    }
    if (rc == 0) {
        g_file->total[dev] += bytes;
        g_file->slot[g_slot].used[dev] += bytes;
    }
    unlock_file();
    return rc;
}

void usage_release(int dev, uint64_t bytes) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return;
    lock_file();
    usage_slot_t *s = &g_file->slot[g_slot];
    if (bytes > s->used[dev]) bytes = s->used[dev];
    s->used[dev] -= bytes;
    g_file->total[dev] -= bytes <= g_file->total[dev] ? bytes : g_file->total[dev];
    unlock_file();
}

uint64_t usage_of(int dev) {
    if (dev < 0 || dev >= SHIM_MAX_DEVICES || attach() != 0) return 0;
    lock_file();
    reclaim_dead();
    uint64_t v = g_file->total[dev];
    unlock_file();
    return v;
}

void usage_forget_process(void) {
    pthread_mutex_init(&g_open_lock, NULL); /* another thread may have held it at fork */
    g_slot = -1; /* the child takes its own slot on first use; the parent keeps its own */
}

void usage_exit(void) {
    if (!g_file || g_slot < 0 || g_pid != getpid()) return;
    lock_file();
    clear_slot(g_slot);
    unlock_file();
    g_slot = -1;
}
