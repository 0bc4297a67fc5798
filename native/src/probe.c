/* gpushare-probe: what a TensorFlow 1.x process sees of its GPUs.
 *
 *   gpushare-probe                 TF 1.x "Found device i with properties:" blocks (stderr,
 *                                  as TF logs), one per visible card
 *   gpushare-probe --raw           one machine-readable line per card (stdout); a card with no
 *                                  room for this process's context reads free_bytes=0
 *                                  context=CUDA_ERROR_OUT_OF_MEMORY
 *   gpushare-probe --device I --alloc-mib N [--count K] [--hold-seconds S] [--api PATH]
 *                                  allocate K x N MiB on card I through one allocation path
 *                                  (cuda_alloc_paths.c: alloc, pitch, managed, async, pool, vmm;
 *                                  default alloc); on failure print the CUDA error name and
 *                                  the path that failed, and exit 2
 *       [--cycles C]               allocate and free the K x N MiB C times in this process
 *                                  (a failure names the cycle); memory must come back
 *   gpushare-probe --device I --alloc-free K [--hold-seconds S] [--api PATH]
 *                                  allocate all that cuMemGetInfo says is free on card I, to
 *                                  the byte, in K allocations (whole 2 MiB pages, the last
 *                                  taking the rest); on failure name the piece, exit 2
 *       [--then-exec CMD ARG...]   while holding the allocation, run CMD as a child
 *                                  process and wait for it; exit with its status (the
 *                                  rest of the command line is the child's)
 *
 * It opens libcuda.so.1 with dlopen and resolves entry points with dlsym, as TF does,
 * so LD_LIBRARY_PATH and the isolation shim decide what it gets. */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_alloc_paths.h"

typedef struct {
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceComputeCapability)(int *, int *, CUdevice);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*PrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*GetErrorName)(CUresult, const char **);
} driver_t;

static driver_t cu;
static void *g_lib;

static const char *err_name(CUresult rc) {
    static char buf[32];
    const char *s = NULL;
    if (cu.GetErrorName && cu.GetErrorName(rc, &s) == CUDA_SUCCESS && s) return s;
    snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)rc);
    return buf;
}

static int load_driver(void) {
    void *lib = g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "gpushare-probe: cannot load libcuda.so.1: %s\n", dlerror());
        return -1;
    }
    struct { void **slot; const char *name; } syms[] = {
        {(void **)&cu.Init, "cuInit"},
        {(void **)&cu.DriverGetVersion, "cuDriverGetVersion"},
        {(void **)&cu.DeviceGetCount, "cuDeviceGetCount"},
        {(void **)&cu.DeviceGet, "cuDeviceGet"},
        {(void **)&cu.DeviceGetName, "cuDeviceGetName"},
        {(void **)&cu.DeviceTotalMem, "cuDeviceTotalMem_v2"},
        {(void **)&cu.DeviceGetAttribute, "cuDeviceGetAttribute"},
        {(void **)&cu.DeviceComputeCapability, "cuDeviceComputeCapability"},
        {(void **)&cu.DeviceGetPCIBusId, "cuDeviceGetPCIBusId"},
        {(void **)&cu.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&cu.PrimaryCtxRelease, "cuDevicePrimaryCtxRelease"},
        {(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"},
        {(void **)&cu.MemGetInfo, "cuMemGetInfo_v2"},
        {(void **)&cu.GetErrorName, "cuGetErrorName"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (!*syms[i].slot) {
            fprintf(stderr, "gpushare-probe: libcuda.so.1 lacks %s\n", syms[i].name);
            return -1;
        }
    }
    return 0;
}

/* tensorflow::strings::HumanReadableNumBytes (TF 1.x). */
static void human_bytes(int64_t num_bytes, char *out, size_t outlen) {
    const char *neg = num_bytes < 0 ? "-" : "";
    if (num_bytes < 0) num_bytes = -num_bytes;
    if (num_bytes < 1024) {
        snprintf(out, outlen, "%s%lldB", neg, (long long)num_bytes);
        return;
    }
    static const char units[] = "KMGTPE";
    const char *unit = units;
    while (num_bytes >= (int64_t)1024 * 1024) {
        num_bytes /= 1024;
        ++unit;
    }
    snprintf(out, outlen, *unit == 'K' ? "%s%.1f%ciB" : "%s%.2f%ciB", neg, num_bytes / 1024.0, *unit);
}

/* TF's logging prefix: "2026-12-02 10:00:00.000000: I file:line] " (I/W/E). */
static void tf_prefix(FILE *f, char severity, const char *where) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "%s.%06ld: %c %s] ", ts, (long)tv.tv_usec, severity, where);
}

static void lowercase(char *s) {
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

typedef struct {
    char name[256], bus[32];
    int major, minor, clock_khz;
    size_t free_b, total_b, device_total;
    CUresult context_rc; /* why no context could be made on the card (0: it could) */
} card_t;

static CUresult describe(int ordinal, card_t *c) {
    CUdevice dev;
    CUcontext ctx;
    CUresult rc;
    if ((rc = cu.DeviceGet(&dev, ordinal)) != CUDA_SUCCESS) return rc;
    if ((rc = cu.DeviceGetName(c->name, sizeof c->name, dev)) != CUDA_SUCCESS) return rc;
    if ((rc = cu.DeviceComputeCapability(&c->major, &c->minor, dev)) != CUDA_SUCCESS) return rc;
    if ((rc = cu.DeviceGetAttribute(&c->clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev)) != CUDA_SUCCESS) return rc;
    if ((rc = cu.DeviceGetPCIBusId(c->bus, sizeof c->bus, dev)) != CUDA_SUCCESS) return rc;
    lowercase(c->bus); /* StreamExecutor lower-cases the bus id */
    if ((rc = cu.DeviceTotalMem(&c->device_total, dev)) != CUDA_SUCCESS) return rc;
    if ((rc = cu.PrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) {
        c->context_rc = rc;
        return rc;
    }
    if ((rc = cu.CtxSetCurrent(ctx)) == CUDA_SUCCESS) rc = cu.MemGetInfo(&c->free_b, &c->total_b);
    cu.CtxSetCurrent(NULL);
    cu.PrimaryCtxRelease(dev);
    return rc;
}

static int show(int raw) {
    int count = 0;
    CUresult rc = cu.DeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "gpushare-probe: cuDeviceGetCount failed: %s\n", err_name(rc));
        return 1;
    }
    for (int i = 0; i < count; i++) {
        card_t c;
        memset(&c, 0, sizeof c);
        if ((rc = describe(i, &c)) != CUDA_SUCCESS) {
            if (raw && c.context_rc == CUDA_ERROR_OUT_OF_MEMORY) {
                /* A full card (or share) has no room for one more context: nothing is
                 * free for a new process there. */
                printf("device=%d name=\"%s\" pci_bus_id=%s cc=%d.%d total_bytes=%zu free_bytes=0 device_total_bytes=%zu "
                       "context=%s\n",
                       i, c.name, c.bus, c.major, c.minor, c.device_total, c.device_total, err_name(rc));
                continue;
            }
            fprintf(stderr, "gpushare-probe: device %d: %s\n", i, err_name(rc));
            return 1;
        }
        if (raw) {
            printf("device=%d name=\"%s\" pci_bus_id=%s cc=%d.%d total_bytes=%zu free_bytes=%zu device_total_bytes=%zu\n", i,
                   c.name, c.bus, c.major, c.minor, c.total_b, c.free_b, c.device_total);
            continue;
        }
        char total[32], free_s[32];
        human_bytes((int64_t)c.total_b, total, sizeof total);
        human_bytes((int64_t)c.free_b, free_s, sizeof free_s);
        /* TF prints one "Found device" record per card: a prefixed first line, then
         * continuation lines without timestamps. */
        tf_prefix(stderr, 'I', "tensorflow/core/common_runtime/gpu/gpu_device.cc:1030");
        fprintf(stderr,
                "Found device %d with properties: \nname: %s major: %d minor: %d memoryClockRate(GHz): %g\n"
                "pciBusID: %s\ntotalMemory: %s freeMemory: %s\n",
                i, c.name, c.major, c.minor, c.clock_khz / 1e6, c.bus, total, free_s);
    }
    fflush(stderr);
    return 0;
}

/* Run argv as a child while this process holds its allocation; its exit status. */
static int run_child(char **argv) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpushare-probe: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "gpushare-probe: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status)) {
        printf("child %s killed by signal %d\n", argv[0], WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    printf("child %s exited %d\n", argv[0], WEXITSTATUS(status));
    return WEXITSTATUS(status);
}

static int allocate(int ordinal, long mib, long times, long hold_seconds, const alloc_path_t *path, long cycles,
                    char **child) {
    CUdevice dev;
    CUcontext ctx;
    CUresult rc = cu.DeviceGet(&dev, ordinal);
    if (rc == CUDA_SUCCESS) rc = cu.PrimaryCtxRetain(&ctx, dev);
    if (rc == CUDA_SUCCESS) rc = cu.CtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS) {
        printf("device %d: %s\n", ordinal, err_name(rc));
        fprintf(stderr, "gpushare-probe: cannot use device %d: %s\n", ordinal, err_name(rc));
        return 2;
    }
    path_state_t state;
    const char *step = NULL;
    if ((rc = path->open(&state, g_lib, dev, &step)) != CUDA_SUCCESS) {
        printf("alloc %ld MiB on device %d failed: %s (%s, --api %s)\n", mib, ordinal, err_name(rc), step, path->name);
        fprintf(stderr, "gpushare-probe: %s on device %d (--api %s): %s\n", step, ordinal, path->name, err_name(rc));
        return 2;
    }
    path_block_t *blocks = calloc((size_t)times, sizeof *blocks);
    if (!blocks) return 1;
    char cycle_note[64] = "";
    int status = 0;
    for (long cycle = 1; cycle <= cycles; cycle++) {
        if (cycles > 1) snprintf(cycle_note, sizeof cycle_note, ", cycle %ld of %ld", cycle, cycles);
        for (long k = 0; k < times; k++) {
            rc = path->alloc(&state, &blocks[k], (size_t)mib << 20, &step);
            if (rc != CUDA_SUCCESS) {
                printf("alloc %ld MiB on device %d failed: %s (%s, --api %s%s)\n", mib, ordinal, err_name(rc), step,
                       path->name, cycle_note);
                fprintf(stderr, "gpushare-probe: %s(%ld MiB) on device %d (--api %s%s): %s\n", step, mib, ordinal,
                        path->name, cycle_note, err_name(rc));
                fflush(stdout);
                for (long j = 0; j < k; j++) path->release(&state, &blocks[j], &step);
                path->close(&state);
                free(blocks);
                return 2;
            }
        }
        if (cycle == cycles) {
            size_t free_b = 0, total_b = 0;
            cu.MemGetInfo(&free_b, &total_b);
            if (cycles > 1)
                printf("allocated and freed %ld x %ld MiB on device %d %ld times via %s\n", times, mib, ordinal,
                       cycles - 1, path->entry);
            printf("allocated %ld x %ld MiB on device %d via %s (free %zu of %zu bytes)\n", times, mib, ordinal,
                   path->entry, free_b, total_b);
            fflush(stdout);
            if (hold_seconds > 0) {
                struct timespec ts = {hold_seconds, 0};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
            }
            if (child) status = run_child(child);
        }
        for (long k = 0; k < times; k++) {
            rc = path->release(&state, &blocks[k], &step);
            if (rc != CUDA_SUCCESS) {
                fprintf(stderr, "gpushare-probe: %s (--api %s%s): %s\n", step, path->name, cycle_note, err_name(rc));
                free(blocks);
                return 1;
            }
        }
    }
    path->close(&state);
    free(blocks);
    cu.CtxSetCurrent(NULL);
    cu.PrimaryCtxRelease(dev);
    return status;
}

/* Allocate all that cuMemGetInfo says is free on the device, to the byte, in
 * `pieces` allocations (whole 2 MiB pages, the last one taking the rest): a stack
 * must let a process have what it tells that process is free. */
static int allocate_free(int ordinal, long pieces, long hold_seconds, const alloc_path_t *path) {
    CUdevice dev;
    CUcontext ctx;
    CUresult rc = cu.DeviceGet(&dev, ordinal);
    if (rc == CUDA_SUCCESS) rc = cu.PrimaryCtxRetain(&ctx, dev);
    if (rc == CUDA_SUCCESS) rc = cu.CtxSetCurrent(ctx);
    path_state_t state;
    const char *step = "cuDeviceGet/cuDevicePrimaryCtxRetain";
    if (rc == CUDA_SUCCESS) rc = path->open(&state, g_lib, dev, &step);
    if (rc != CUDA_SUCCESS) {
        printf("device %d: %s (%s)\n", ordinal, err_name(rc), step);
        return 2;
    }
    size_t free_b = 0, total_b = 0;
    if ((rc = cu.MemGetInfo(&free_b, &total_b)) != CUDA_SUCCESS) {
        printf("cuMemGetInfo on device %d: %s\n", ordinal, err_name(rc));
        return 2;
    }
    path_block_t *blocks = calloc((size_t)pieces, sizeof *blocks);
    if (!blocks) return 1;
    size_t page = (size_t)2 << 20, piece = free_b / (size_t)pieces / page * page, done = 0;
    for (long k = 0; k < pieces; k++) {
        size_t bytes = k == pieces - 1 ? free_b - done : piece;
        if (bytes == 0) continue;
        rc = path->alloc(&state, &blocks[k], bytes, &step);
        if (rc != CUDA_SUCCESS) {
            printf("alloc %zu bytes (piece %ld of %ld; %zu of the %zu bytes free taken so far) on device %d failed: "
                   "%s (%s, --api %s)\n",
                   bytes, k + 1, pieces, done, free_b, ordinal, err_name(rc), step, path->name);
            fflush(stdout);
            for (long j = 0; j < k; j++)
                if (blocks[j].ptr) path->release(&state, &blocks[j], &step);
            free(blocks);
            return 2;
        }
        done += bytes;
    }
    size_t after = 0, total_after = 0;
    cu.MemGetInfo(&after, &total_after);
    printf("allocated all %zu bytes free of %zu on device %d in %ld allocation(s) via %s (free now %zu bytes)\n",
           free_b, total_b, ordinal, pieces, path->entry, after);
    fflush(stdout);
    if (hold_seconds > 0) {
        struct timespec ts = {hold_seconds, 0};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    for (long k = 0; k < pieces; k++)
        if (blocks[k].ptr) path->release(&state, &blocks[k], &step);
    path->close(&state);
    free(blocks);
    return 0;
}

static long number_arg(const char *flag, const char *value, long min) {
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || !*value || *end || errno || v < min) {
        fprintf(stderr, "gpushare-probe: %s expects an integer >= %ld, got '%s'\n", flag, min, value ? value : "");
        exit(64);
    }
    return v;
}

int main(int argc, char **argv) {
    long device = -1, mib = -1, times = 1, hold = 0, cycles = 1, free_pieces = 0;
    int raw = 0;
    char **child = NULL;
    const alloc_path_t *path = alloc_path_named("alloc");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--device")) { device = number_arg(a, next, 0); i++; }
        else if (!strcmp(a, "--alloc-mib")) { mib = number_arg(a, next, 1); i++; }
        else if (!strcmp(a, "--count")) { times = number_arg(a, next, 1); i++; }
        else if (!strcmp(a, "--alloc-free")) { free_pieces = number_arg(a, next, 1); i++; }
        else if (!strcmp(a, "--hold-seconds")) { hold = number_arg(a, next, 0); i++; }
        else if (!strcmp(a, "--cycles")) { cycles = number_arg(a, next, 1); i++; }
        else if (!strcmp(a, "--then-exec")) {
            if (!next) {
                fprintf(stderr, "gpushare-probe: --then-exec expects a command\n");
                return 64;
            }
            child = &argv[i + 1];
            break;
        }
        else if (!strcmp(a, "--api")) {
            path = next ? alloc_path_named(next) : NULL;
            if (!path) {
                fprintf(stderr, "gpushare-probe: --api expects one of %s, got '%s'\n", ALLOC_PATH_NAMES, next ? next : "");
                return 64;
            }
            i++;
        } else if (!strcmp(a, "--raw")) raw = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: gpushare-probe [--raw] | --device I --alloc-mib N [--count K] [--hold-seconds S] [--api %s]\n"
                   "                      [--cycles C] [--then-exec CMD ARG...]\n"
                   "                    | --device I --alloc-free K [--hold-seconds S] [--api PATH]\n",
                   ALLOC_PATH_NAMES);
            return 0;
        } else {
            fprintf(stderr, "gpushare-probe: unknown argument '%s' (see --help)\n", a);
            return 64;
        }
    }
    if (free_pieces > 0 && (device < 0 || mib > 0 || cycles > 1 || child || times > 1)) {
        fprintf(stderr, "gpushare-probe: --alloc-free goes with --device (and --hold-seconds, --api) only\n");
        return 64;
    }
    if (free_pieces > 0) mib = 1; /* for the checks below */
    if ((device >= 0) != (mib > 0) || ((cycles > 1 || child) && device < 0)) {
        fprintf(stderr, "gpushare-probe: --device and --alloc-mib go together\n");
        return 64;
    }
    if (load_driver() != 0) return 1;
    CUresult rc = cu.Init(0);
    if (rc != CUDA_SUCCESS) {
        printf("cuInit: %s\n", err_name(rc));
        tf_prefix(stderr, 'E', "tensorflow/stream_executor/cuda/cuda_driver.cc:406");
        fprintf(stderr, "failed call to cuInit: %s\n", err_name(rc));
        return 2;
    }
    if (free_pieces > 0) return allocate_free((int)device, free_pieces, hold, path);
    if (device >= 0) return allocate((int)device, mib, times, hold, path, cycles, child);
    return show(raw);
}
