/* The node-wide process table of the mock GPU libraries (interface and file location:
 * gpu_process_table.h).  Each process owns one slot and writes only its own counters
 * with plain atomic stores, so the mock driver's allocation path takes no lock; the
 * robust mutex in the file guards only slot ownership.  Readers skip slots whose pid
 * is gone or was reused (start time differs), which is how a SIGKILLed process drops
 * out of the list without anyone cleaning up after it. */
#include "gpu_process_table.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPT_MAGIC 0x47505431u /* "GPT1" */
#define GPT_VERSION 1u
#define GPT_SLOTS 512

typedef struct {
    int32_t pid; /* 0 = free */
    uint32_t unused;
    uint64_t start_time; /* /proc/<pid>/stat field 22: tells a reused pid apart */
    uint64_t used[GPT_MAX_CARDS];
} gpt_slot_t;

typedef struct {
    uint32_t magic, version, slots, cards;
    pthread_mutex_t lock; /* robust, process-shared: slot ownership only */
    gpt_slot_t slot[GPT_SLOTS];
} gpt_file_t;

static gpt_file_t *g_file;
static gpt_slot_t *g_me; /* NULL until the first update, and again in a forked child */
static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_failed;
static char g_path[512];

static void warn(const char *what) {
    if (__atomic_exchange_n(&g_failed, 1, __ATOMIC_ACQ_REL)) return;
    fprintf(stderr, "gpushare-mock: process table %s: %s: %s (process listing disabled)\n", gpt_path(), what,
            strerror(errno));
}

/* Default directory: /run/gpushare-mock where it can be made, else /tmp/gpushare-mock. */
const char *gpt_path(void) {
    if (g_path[0]) return g_path;
    const char *dir = getenv("GPUSHARE_MOCK_STATE_DIR");
    char buf[400];
    if (!dir || !*dir) {
        dir = "/run/gpushare-mock";
        if (mkdir(dir, 01777) != 0 && errno != EEXIST) dir = "/tmp/gpushare-mock";
        else if (access(dir, W_OK) != 0) dir = "/tmp/gpushare-mock";
    }
    snprintf(buf, sizeof buf, "%s", dir);
    snprintf(g_path, sizeof g_path, "%s/process-table", buf);
    return g_path;
}

static uint64_t start_time_of(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st) != 1)
        return 0;
    return st;
}

/* A zombie has exited: it holds no device memory any more. */
static int is_zombie(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static int slot_alive(const gpt_slot_t *s) {
    pid_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    if (is_zombie(pid)) return 0;
    uint64_t st = start_time_of(pid);
    return !(st != 0 && s->start_time != 0 && st != s->start_time);
}

static void lock_file(void) {
    if (pthread_mutex_lock(&g_file->lock) == EOWNERDEAD) pthread_mutex_consistent(&g_file->lock);
}

/* Map the table; create == 0 only opens an existing one (readers never create it). */
static int map_file(int create) {
    if (g_file) return 0;
    const char *path = gpt_path();
    if (create) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        if (mkdir(dir, 01777) == 0) (void)chmod(dir, 01777); /* shared by every user of the node */
    }
    int fd = open(path, (create ? O_RDWR | O_CREAT : O_RDWR) | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (create) warn("cannot open");
        return -1;
    }
    if (flock(fd, LOCK_EX) != 0) { if (create) warn("cannot lock"); close(fd); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { warn("cannot stat"); close(fd); return -1; }
    if ((size_t)st.st_size < sizeof(gpt_file_t)) {
        (void)fchmod(fd, 0666);
        if (ftruncate(fd, (off_t)sizeof(gpt_file_t)) != 0) { warn("cannot size"); close(fd); return -1; }
    }
    gpt_file_t *f = mmap(NULL, sizeof(gpt_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED) { warn("cannot map"); close(fd); return -1; }
    if (f->magic != GPT_MAGIC) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        memset(f, 0, sizeof *f);
        pthread_mutex_init(&f->lock, &a);
        pthread_mutexattr_destroy(&a);
        f->version = GPT_VERSION;
        f->slots = GPT_SLOTS;
        f->cards = GPT_MAX_CARDS;
        __atomic_store_n(&f->magic, GPT_MAGIC, __ATOMIC_RELEASE);
    } else if (f->version != GPT_VERSION || f->slots != GPT_SLOTS || f->cards != GPT_MAX_CARDS) {
        errno = EPROTO;
        warn("written by an incompatible version");
        munmap(f, sizeof *f);
        close(fd);
        return -1;
    }
    flock(fd, LOCK_UN);
    close(fd);
    g_file = f;
    return 0;
}

static void forget_slot_in_child(void) {
    pthread_mutex_init(&g_attach_lock, NULL);
    g_me = NULL; /* the child takes its own slot when it allocates */
}

static int attach(void) {
    pthread_mutex_lock(&g_attach_lock);
    if (!g_me && !g_failed && map_file(1) == 0) {
        static int atfork_done;
        if (!atfork_done++) pthread_atfork(NULL, NULL, forget_slot_in_child);
        pid_t pid = getpid();
        uint64_t start = start_time_of(pid);
        lock_file();
        gpt_slot_t *free_slot = NULL;
        for (int i = 0; i < GPT_SLOTS && !free_slot; i++) {
            gpt_slot_t *s = &g_file->slot[i];
            if (s->pid == 0 || s->pid == pid || !slot_alive(s)) free_slot = s; /* same pid: left before an exec */
        }
        if (free_slot) {
            memset(free_slot->used, 0, sizeof free_slot->used);
            free_slot->start_time = start;
            __atomic_store_n(&free_slot->pid, pid, __ATOMIC_RELEASE);
            g_me = free_slot;
        }
        pthread_mutex_unlock(&g_file->lock);
        if (!free_slot) {
            errno = ENOSPC;
            warn("no free process slot");
        }
    }
    int rc = g_me ? 0 : -1;
    pthread_mutex_unlock(&g_attach_lock);
    return rc;
}

int gpt_set_used(unsigned physical_index, unsigned long long used_bytes) {
    if (physical_index >= GPT_MAX_CARDS) return -1;
    gpt_slot_t *me = __atomic_load_n(&g_me, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!me, 0)) {
        if (used_bytes == 0) return 0; /* nothing held: no need for a slot */
        if (attach() != 0) return -1;
        me = g_me;
    }
    __atomic_store_n(&me->used[physical_index], (uint64_t)used_bytes, __ATOMIC_RELEASE);
    return 0;
}

static int by_pid(const void *a, const void *b) {
    unsigned x = ((const struct gpt_entry *)a)->pid, y = ((const struct gpt_entry *)b)->pid;
    return (x > y) - (x < y);
}

int gpt_list(unsigned physical_index, struct gpt_entry *out, unsigned max) {
    if (physical_index >= GPT_MAX_CARDS || (!out && max > 0)) return -1;
    pthread_mutex_lock(&g_attach_lock);
    int mapped = map_file(0) == 0;
    pthread_mutex_unlock(&g_attach_lock);
    if (!mapped) return 0; /* no process ever held memory on this node */
    struct gpt_entry all[GPT_SLOTS];
    unsigned n = 0;
    for (int i = 0; i < GPT_SLOTS; i++) {
        gpt_slot_t *s = &g_file->slot[i];
        uint64_t used = __atomic_load_n(&s->used[physical_index], __ATOMIC_ACQUIRE);
        if (used == 0 || !slot_alive(s)) continue;
        all[n++] = (struct gpt_entry){(unsigned)s->pid, used};
    }
    qsort(all, n, sizeof all[0], by_pid);
    for (unsigned i = 0; i < n && i < max; i++) out[i] = all[i];
    return (int)n;
}

/* A process that ends normally gives its slot back at once. */
__attribute__((destructor)) static void gpt_exit(void) {
    gpt_slot_t *me = g_me;
    if (!me || me->pid != getpid()) return;
    memset(me->used, 0, sizeof me->used);
    __atomic_store_n(&me->pid, 0, __ATOMIC_RELEASE);
    g_me = NULL;
}
