/* gpushare-attack: what a hostile workload tries to take more than its share
 * (docs/threat-model.md).  Each attempt allocates through the driver's entry points,
 * found in a way that would step around an isolation library that does not hold it,
 * and reports what the driver granted; the suite's hostile checks run it in a pod.
 *
 *   gpushare-attack loader TRICK --device I --alloc-mib N [--lib-dir DIR]
 *       find cuMemAlloc_v2 & co. by TRICK, then allocate N MiB on card I:
 *         deepbind  through a library opened with RTLD_DEEPBIND that links libcuda
 *         dlmopen   through that library loaded into a new link-map namespace
 *         dlvsym    with the C library's dlsym, fetched by version from libc.so.6
 *         preload   with plain dlsym, run under LD_PRELOAD=DIR/libgpushare-attack-dlsym.so
 *                   (a preload of the workload's own defining dlsym, loaded first)
 *         symtab    reading libcuda.so.1's dynamic symbol table itself (beyond what
 *                   an interposition library can hold: docs/threat-model.md)
 *   gpushare-attack stream --device I --stream-device J --alloc-mib N
 *       fill card J's share (what cuMemGetInfo says is free there), then make card
 *       I's context current and allocate N MiB in stream order on a stream of card J
 *   gpushare-attack vmm-release --device I --hold-mib H --alloc-mib N
 *       cuMemCreate H MiB on card I, map it at two reserved ranges, cuMemRelease the
 *       handle (the driver keeps the memory while a mapping uses it); then try N MiB
 *       with cuMemAlloc_v2 three times: with both mappings, after cuMemUnmap of one,
 *       after cuMemUnmap of the other (the memory is gone only then).  One line per
 *       try: "<stage>: alloc N MiB granted" or "<stage>: alloc N MiB failed: ERROR";
 *       each granted block is freed at once
 *   gpushare-attack exec --device I --alloc-mib N -- CMD [ARG...]
 *       allocate N MiB on card I, print this process's pid, and, still holding it,
 *       replace this program by CMD (execvp: the same pid, a new program)
 *   gpushare-attack pid-reuse --device I --alloc-mib N -- CMD [ARG...]
 *       a holder allocates N MiB on card I and is killed with SIGKILL; then CMD runs
 *       as a new process given the holder's pid, so a stack that keys charges by pid
 *       meets a live process with the dead one's pid.  The pid is given in new user
 *       and PID namespaces (the workload's own: clone3 with set_tid), or, where the
 *       pod may not make them, by starting short-lived processes until the pids
 *       wrap round to the holder's (when pid_max allows it within MAX_CYCLE pids).
 *       Prints "holder pid P holds N MiB" and "pid P reused"; exits with CMD's status
 *
 * Prints one line (vmm-release: one per try); exits 0 when the last allocation was
 * granted, 2 with the CUDA error name when the driver refused it, 1 when the attempt
 * could not be set up (exec: CMD's own exit status, or 1 if it could not start). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define DEFAULT_LIB_DIR "/usr/local/lib/gpushare-attack"

typedef void *(*resolve_fn)(const char *);

static struct {
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*StreamSynchronize)(CUstream);
} cu;

static void *g_handle;
static resolve_fn g_direct;
static void *(*g_libc_dlsym)(void *, const char *);

static void *by_dlsym(const char *name) { return dlsym(g_handle, name); }
static void *by_direct(const char *name) { return g_direct(name); }
static void *by_libc_dlsym(const char *name) { return g_libc_dlsym(g_handle, name); }

/* The definition of `name` in libcuda.so.1's own dynamic symbol table. */
static void *by_symtab(const char *name) {
    struct link_map *m = NULL;
    if (dlinfo(g_handle, RTLD_DI_LINKMAP, &m) != 0 || !m) return NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *hash = NULL, *gnu = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
        uintptr_t p = d->d_un.d_ptr < m->l_addr ? m->l_addr + d->d_un.d_ptr : d->d_un.d_ptr;
        if (d->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)p;
        if (d->d_tag == DT_STRTAB) strtab = (const char *)p;
        if (d->d_tag == DT_HASH) hash = (const uint32_t *)p;
        if (d->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)p;
    }
    if (!symtab || !strtab || (!hash && !gnu)) return NULL;
    size_t count;
    if (hash) {
        count = hash[1];
    } else {
        const uint32_t *buckets = gnu + 4 + gnu[2] * (sizeof(ElfW(Addr)) / 4), *chain = buckets + gnu[0];
        uint32_t last = 0;
        for (uint32_t i = 0; i < gnu[0]; i++)
            if (buckets[i] > last) last = buckets[i];
        if (last >= gnu[1])
            while (!(chain[last - gnu[1]] & 1u)) last++;
        count = last >= gnu[1] ? last + 1 : gnu[1];
    }
    for (size_t i = 0; i < count; i++)
        if (symtab[i].st_shndx != SHN_UNDEF && strcmp(strtab + symtab[i].st_name, name) == 0)
            return (void *)(m->l_addr + symtab[i].st_value);
    return NULL;
}

static const char *err_name(CUresult rc) {
    static char buf[32];
    const char *s = NULL;
    if (cu.GetErrorName && cu.GetErrorName(rc, &s) == CUDA_SUCCESS && s) return s;
    snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)rc);
    return buf;
}

static int resolve(resolve_fn fn, const char *how) {
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&cu.Init, "cuInit"},
        {(void **)&cu.DeviceGet, "cuDeviceGet"},
        {(void **)&cu.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"},
        {(void **)&cu.MemAlloc, "cuMemAlloc_v2"},
        {(void **)&cu.MemGetInfo, "cuMemGetInfo_v2"},
        {(void **)&cu.GetErrorName, "cuGetErrorName"},
        {(void **)&cu.StreamCreate, "cuStreamCreate"},
        {(void **)&cu.MemAllocAsync, "cuMemAllocAsync"},
        {(void **)&cu.StreamSynchronize, "cuStreamSynchronize"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = fn(syms[i].name))) {
            fprintf(stderr, "gpushare-attack: %s found no %s\n", how, syms[i].name);
            return -1;
        }
    return 0;
}

static int open_driver(void) {
    g_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g_handle) fprintf(stderr, "gpushare-attack: cannot load libcuda.so.1: %s\n", dlerror());
    return g_handle ? 0 : -1;
}

static int find_entry_points(const char *trick, const char *lib_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libgpushare-attack-direct.so", lib_dir);
    if (!strcmp(trick, "deepbind") || !strcmp(trick, "dlmopen")) {
        void *h = !strcmp(trick, "deepbind") ? dlopen(path, RTLD_NOW | RTLD_DEEPBIND)
                                             : dlmopen(LM_ID_NEWLM, path, RTLD_NOW);
        if (!h) {
            fprintf(stderr, "gpushare-attack: cannot open %s (%s): %s\n", path, trick, dlerror());
            return -1;
        }
        g_direct = (resolve_fn)dlsym(h, "attack_direct");
        if (!g_direct) {
            fprintf(stderr, "gpushare-attack: %s has no attack_direct\n", path);
            return -1;
        }
        return resolve(by_direct, trick);
    }
    if (open_driver() != 0) return -1;
    if (!strcmp(trick, "dlvsym")) {
        static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        for (size_t i = 0; libc && !g_libc_dlsym && i < sizeof versions / sizeof versions[0]; i++)
            g_libc_dlsym = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", versions[i]);
        if (!g_libc_dlsym) {
            fprintf(stderr, "gpushare-attack: no dlsym in libc.so.6 by version\n");
            return -1;
        }
        return resolve(by_libc_dlsym, trick);
    }
    if (!strcmp(trick, "preload")) return resolve(by_dlsym, trick);
    if (!strcmp(trick, "symtab")) return resolve(by_symtab, trick);
    fprintf(stderr, "gpushare-attack: unknown loader trick %s (deepbind, dlmopen, dlvsym, preload, symtab)\n", trick);
    return -1;
}

static int context_on(int ordinal, CUcontext *ctx) {
    CUdevice dev;
    CUresult rc;
    if ((rc = cu.DeviceGet(&dev, ordinal)) != CUDA_SUCCESS || (rc = cu.PrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS ||
        (rc = cu.CtxSetCurrent(*ctx)) != CUDA_SUCCESS) {
        printf("context on device %d failed: %s\n", ordinal, err_name(rc));
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
    }
    return 0;
}

static int loader(const char *trick, int device, long mib, const char *lib_dir) {
    if (find_entry_points(trick, lib_dir) != 0) return 1;
    CUresult rc = cu.Init(0);
    if (rc != CUDA_SUCCESS) {
        printf("cuInit failed: %s (%s)\n", err_name(rc), trick);
        return 1;
    }
    CUcontext ctx;
    int st = context_on(device, &ctx);
    if (st) return st;
    CUdeviceptr p;
    rc = cu.MemAlloc(&p, (size_t)mib * MIB);
    if (rc != CUDA_SUCCESS) {
        printf("alloc %ld MiB on device %d failed: %s (cuMemAlloc_v2 found by %s)\n", mib, device, err_name(rc), trick);
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
    }
    printf("granted %ld MiB on device %d (cuMemAlloc_v2 found by %s)\n", mib, device, trick);
    return 0;
}

static int stream(int device, int stream_device, long mib) {
    if (open_driver() != 0 || resolve(by_dlsym, "dlsym") != 0) return 1;
    CUresult rc = cu.Init(0);
    if (rc != CUDA_SUCCESS) {
        printf("cuInit failed: %s\n", err_name(rc));
        return 1;
    }
    CUcontext own, other;
    int st = context_on(stream_device, &other);
    if (st) return st;
    CUstream s;
    size_t free_b = 0, total_b = 0;
    CUdeviceptr fill = 0, p;
    if ((rc = cu.StreamCreate(&s, 0)) != CUDA_SUCCESS || (rc = cu.MemGetInfo(&free_b, &total_b)) != CUDA_SUCCESS) {
        printf("stream on device %d failed: %s\n", stream_device, err_name(rc));
        return 1;
    }
    size_t filled = free_b & ~(2 * MIB - 1);
    if (filled && (rc = cu.MemAlloc(&fill, filled)) != CUDA_SUCCESS) {
        printf("filling device %d with %zu MiB failed: %s\n", stream_device, filled / MIB, err_name(rc));
        return 1;
    }
    if ((st = context_on(device, &own)) != 0) return st;
    rc = cu.MemAllocAsync(&p, (size_t)mib * MIB, s);
    if (rc == CUDA_SUCCESS) rc = cu.StreamSynchronize(s);
    if (rc != CUDA_SUCCESS) {
        printf("alloc %ld MiB on a stream of device %d (device %d current, %zu MiB held there) failed: %s\n", mib,
               stream_device, device, filled / MIB, err_name(rc));
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
    }
    printf("granted %ld MiB on a stream of device %d while device %d was current, after %zu MiB filled its share\n",
           mib, stream_device, device, filled / MIB);
    return 0;
}

static struct {
    CUresult (*Granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*Reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*Create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*Release)(CUmemGenericAllocationHandle);
    CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*Unmap)(CUdeviceptr, size_t);
    CUresult (*MemFree)(CUdeviceptr);
} vmm;

/* Entry points of the driver, with plain dlsym (as any program finds them). */
static int driver_with_context(int device, CUcontext *ctx) {
    if (open_driver() != 0 || resolve(by_dlsym, "dlsym") != 0) return 1;
    CUresult rc = cu.Init(0);
    if (rc != CUDA_SUCCESS) {
        printf("cuInit failed: %s\n", err_name(rc));
        return 1;
    }
    return context_on(device, ctx);
}

/* One try of N MiB past what the mappings hold; 0 when granted (and freed). */
static CUresult try_alloc(const char *stage, long mib) {
    CUdeviceptr p;
    CUresult rc = cu.MemAlloc(&p, (size_t)mib * MIB);
    if (rc == CUDA_SUCCESS) {
        printf("%s: alloc %ld MiB granted\n", stage, mib);
        vmm.MemFree(p);
    } else {
        printf("%s: alloc %ld MiB failed: %s\n", stage, mib, err_name(rc));
    }
    fflush(stdout);
    return rc;
}

static int vmm_release(int device, long hold_mib, long mib) {
    CUcontext ctx;
    int st = driver_with_context(device, &ctx);
    if (st) return st;
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&vmm.Granularity, "cuMemGetAllocationGranularity"},
        {(void **)&vmm.Reserve, "cuMemAddressReserve"},
        {(void **)&vmm.Create, "cuMemCreate"},
        {(void **)&vmm.Release, "cuMemRelease"},
        {(void **)&vmm.Map, "cuMemMap"},
        {(void **)&vmm.Unmap, "cuMemUnmap"},
        {(void **)&vmm.MemFree, "cuMemFree_v2"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(g_handle, syms[i].name))) {
            printf("no %s in libcuda.so.1\n", syms[i].name);
            return 1;
        }
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t gran = 0;
    CUresult rc = vmm.Granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS || !gran) {
        printf("cuMemGetAllocationGranularity failed: %s\n", err_name(rc));
        return 1;
    }
    size_t size = ((size_t)hold_mib * MIB + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CUdeviceptr at[2];
    const char *step = "cuMemCreate";
    if ((rc = vmm.Create(&h, size, &prop, 0)) == CUDA_SUCCESS) {
        for (int i = 0; i < 2 && rc == CUDA_SUCCESS; i++) {
            step = "cuMemAddressReserve";
            if ((rc = vmm.Reserve(&at[i], size, 0, 0, 0)) == CUDA_SUCCESS) step = "cuMemMap", rc = vmm.Map(at[i], size, 0, h, 0);
        }
        if (rc == CUDA_SUCCESS) step = "cuMemRelease", rc = vmm.Release(h);
    }
    if (rc != CUDA_SUCCESS) {
        printf("holding %ld MiB by cuMemCreate on device %d failed at %s: %s\n", hold_mib, device, step, err_name(rc));
        return 1;
    }
    printf("holding %zu MiB on device %d in two mappings of one cuMemCreate handle, released\n", size / MIB, device);
    try_alloc("mapped twice, handle released", mib);
    if ((rc = vmm.Unmap(at[0], size)) != CUDA_SUCCESS) {
        printf("cuMemUnmap of the first mapping failed: %s\n", err_name(rc));
        return 1;
    }
    try_alloc("mapped once, handle released", mib);
    if ((rc = vmm.Unmap(at[1], size)) != CUDA_SUCCESS) {
        printf("cuMemUnmap of the second mapping failed: %s\n", err_name(rc));
        return 1;
    }
    rc = try_alloc("unmapped, handle released", mib);
    return rc == CUDA_SUCCESS ? 0 : rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
}

static int exec_holding(int device, long mib, char **argv) {
    CUcontext ctx;
    int st = driver_with_context(device, &ctx);
    if (st) return st;
    CUdeviceptr p;
    CUresult rc = cu.MemAlloc(&p, (size_t)mib * MIB);
    if (rc != CUDA_SUCCESS) {
        printf("alloc %ld MiB on device %d failed: %s\n", mib, device, err_name(rc));
        return rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
    }
    printf("pid %d holds %ld MiB on device %d; exec %s\n", (int)getpid(), mib, device, argv[0]);
    fflush(stdout);
    execvp(argv[0], argv);
    printf("exec %s failed\n", argv[0]);
    return 1;
}

/* Exit status of child pid, as a shell gives it (128 + signal when killed). */
static int status_of(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The holder: allocate, say so on fd, hold until killed. */
static void hold_and_wait(int device, long mib, int fd) {
    CUcontext ctx;
    CUdeviceptr p;
    char line[160];
    int n;
    if (driver_with_context(device, &ctx) != 0) {
        n = snprintf(line, sizeof line, "holder could not use device %d\n", device);
    } else {
        CUresult rc = cu.MemAlloc(&p, (size_t)mib * MIB);
        n = rc == CUDA_SUCCESS ? snprintf(line, sizeof line, "holder pid %d holds %ld MiB on device %d\n", (int)getpid(), mib, device)
                               : snprintf(line, sizeof line, "holder alloc %ld MiB failed: %s\n", mib, err_name(rc));
    }
    fflush(stdout);
    if (n > 0 && write(fd, line, (size_t)n) != n) _exit(1);
    close(fd);
    for (;;) pause();
}

/* Give pid want to CMD by starting processes that exit at once until the pids wrap
 * round to it (vfork: each costs little more than the pid). */
#define MAX_CYCLE 262144L
static int reuse_by_cycling(pid_t want, char **argv) {
    long pid_max = 0;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    if (!f || fscanf(f, "%ld", &pid_max) != 1) pid_max = 0;
    if (f) fclose(f);
    if (pid_max <= 0 || pid_max > MAX_CYCLE) {
        printf("pids not cycled: pid_max %ld (at most %ld cycled)\n", pid_max, MAX_CYCLE);
        return 1;
    }
    for (long i = 0; i < 2 * pid_max; i++) {
        pid_t c = vfork();
        if (c < 0) {
            printf("vfork failed after %ld processes: %s\n", i, strerror(errno));
            return 1;
        }
        if (c == 0) {
            if (getpid() == want) execvp(argv[0], argv);
            _exit(getpid() == want ? 127 : 0);
        }
        if (c == want) {
            printf("pid %d reused (after %ld processes)\n", (int)c, i);
            fflush(stdout);
            return status_of(c);
        }
        status_of(c);
    }
    printf("pid %d never came round in %ld processes\n", (int)want, 2 * pid_max);
    return 1;
}

/* Start the holder, kill it, and give its pid to CMD: with clone3 in the first
 * process of a PID namespace of the workload's own, else by cycling the pids. */
static int reuse_pid(int device, long mib, char **argv, int own_namespace) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t holder = fork();
    if (holder < 0) return 1;
    if (holder == 0) {
        close(fds[0]);
        hold_and_wait(device, mib, fds[1]);
    }
    close(fds[1]);
    char line[160] = {0};
    ssize_t got = read(fds[0], line, sizeof line - 1);
    close(fds[0]);
    printf("%s", got > 0 ? line : "holder said nothing\n");
    fflush(stdout);
    kill(holder, SIGKILL);
    status_of(holder);
    if (got <= 0 || strncmp(line, "holder pid ", 11) != 0) return 1;
    pid_t want = holder;
    if (!own_namespace) return reuse_by_cycling(want, argv);
    struct clone_args args = {.exit_signal = SIGCHLD, .set_tid = (uint64_t)(uintptr_t)&want, .set_tid_size = 1};
    long child = syscall(SYS_clone3, &args, sizeof args);
    if (child < 0) {
        printf("clone3 with pid %d failed: %s\n", (int)want, strerror(errno));
        return 1;
    }
    if (child == 0) {
        printf("pid %d reused\n", (int)getpid());
        fflush(stdout);
        execvp(argv[0], argv);
        printf("exec %s failed\n", argv[0]);
        _exit(1);
    }
    return status_of((pid_t)child);
}

static int pid_reuse(int device, long mib, char **argv) {
    if (unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) {
        printf("new user and PID namespaces refused (%s): cycling the pids\n", strerror(errno));
        fflush(stdout);
        return reuse_pid(device, mib, argv, 0);
    }
    fflush(stdout);
    pid_t init = fork(); /* the first process of the new PID namespace */
    if (init < 0) return 1;
    if (init == 0) _exit(reuse_pid(device, mib, argv, 1));
    return status_of(init);
}

static long number(const char *opt, const char *v) {
    char *end;
    long n = v ? strtol(v, &end, 10) : -1;
    if (!v || *end || n < 0) {
        fprintf(stderr, "gpushare-attack: %s needs a number, got %s\n", opt, v ? v : "nothing");
        exit(1);
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr,
                "usage: gpushare-attack loader deepbind|dlmopen|dlvsym|preload|symtab --device I --alloc-mib N "
                "[--lib-dir DIR]\n"
                "       gpushare-attack stream --device I --stream-device J --alloc-mib N\n"
                "       gpushare-attack vmm-release --device I --hold-mib H --alloc-mib N\n"
                "       gpushare-attack exec --device I --alloc-mib N -- CMD [ARG...]\n"
                "       gpushare-attack pid-reuse --device I --alloc-mib N -- CMD [ARG...]\n");
        return argc < 2 ? 1 : 0;
    }
    const char *what = argv[1], *trick = NULL, *lib_dir = DEFAULT_LIB_DIR;
    int i = 2;
    if (!strcmp(what, "loader")) {
        if (argc < 3) return fprintf(stderr, "gpushare-attack: loader needs a trick\n"), 1;
        trick = argv[i++];
    }
    long device = 0, stream_device = -1, mib = -1, hold_mib = -1;
    char **command = NULL;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            command = &argv[i + 1];
            break;
        }
        if (!strcmp(a, "--device")) device = number(a, v), i++;
        else if (!strcmp(a, "--hold-mib")) hold_mib = number(a, v), i++;
        else if (!strcmp(a, "--stream-device")) stream_device = number(a, v), i++;
        else if (!strcmp(a, "--alloc-mib")) mib = number(a, v), i++;
        else if (!strcmp(a, "--lib-dir") && v) lib_dir = v, i++;
        else return fprintf(stderr, "gpushare-attack: unknown argument %s\n", a), 1;
    }
    if (mib < 0) return fprintf(stderr, "gpushare-attack: --alloc-mib is required\n"), 1;
    if (!strcmp(what, "loader")) return loader(trick, (int)device, mib, lib_dir);
    if (!strcmp(what, "stream")) {
        if (stream_device < 0) return fprintf(stderr, "gpushare-attack: stream needs --stream-device\n"), 1;
        return stream((int)device, (int)stream_device, mib);
    }
    if (!strcmp(what, "vmm-release")) {
        if (hold_mib <= 0) return fprintf(stderr, "gpushare-attack: vmm-release needs --hold-mib (more than 0)\n"), 1;
        return vmm_release((int)device, hold_mib, mib);
    }
    if (!strcmp(what, "exec")) {
        if (!command || !command[0]) return fprintf(stderr, "gpushare-attack: exec needs -- CMD\n"), 1;
        return exec_holding((int)device, mib, command);
    }
    if (!strcmp(what, "pid-reuse")) {
        if (!command || !command[0]) return fprintf(stderr, "gpushare-attack: pid-reuse needs -- CMD\n"), 1;
        return pid_reuse((int)device, mib, command);
    }
    fprintf(stderr, "gpushare-attack: unknown attempt %s (loader, stream, vmm-release, exec, pid-reuse)\n", what);
    return 1;
}
