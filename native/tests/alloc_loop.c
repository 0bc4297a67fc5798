/* Benchmark kernel: N x (allocate 1 MiB, free) on device 0 through one allocation
 * path (cuda_alloc_paths.h; default alloc), entry points resolved with dlsym like
 * frameworks do.  Prints the loop's wall time in nanoseconds.
 *
 *   alloc-loop N [alloc|pitch|managed|async|pool|vmm] */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_alloc_paths.h"

/* The measured loop (callgrind collects inside this function only). */
__attribute__((noinline)) long alloc_free_loop(const alloc_path_t *path, path_state_t *st, long n) {
    const char *step;
    for (long i = 0; i < n; i++) {
        path_block_t b;
        if (path->alloc(st, &b, 1 << 20, &step) != CUDA_SUCCESS || path->release(st, &b, &step) != CUDA_SUCCESS) return i;
    }
    return n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    const alloc_path_t *path = alloc_path_named(argc > 2 ? argv[2] : "alloc");
    if (!path) { fprintf(stderr, "alloc-loop: unknown path '%s' (%s)\n", argv[2], ALLOC_PATH_NAMES); return 64; }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "alloc-loop: %s\n", dlerror()); return 1; }
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*setc)(CUcontext) = (CUresult (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
    CUdevice dev;
    CUcontext ctx;
    if (!init || init(0) || get(&dev, 0) || retain(&ctx, dev) || setc(ctx)) { fprintf(stderr, "alloc-loop: setup failed\n"); return 1; }
    path_state_t st;
    const char *step = "";
    CUresult rc = path->open(&st, lib, dev, &step);
    if (rc != CUDA_SUCCESS) { fprintf(stderr, "alloc-loop: %s failed: %d\n", step, (int)rc); return 1; }
    if (alloc_free_loop(path, &st, 1) != 1) { fprintf(stderr, "alloc-loop: warm-up failed\n"); return 1; }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long done = alloc_free_loop(path, &st, n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    path->close(&st);
    if (done != n) { fprintf(stderr, "alloc-loop: failed at %ld\n", done); return 1; }
    printf("%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    return 0;
}
