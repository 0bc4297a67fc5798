/* Benchmark kernel: N x (cuMemAlloc 1 MiB, cuMemFree) on device 0, resolved with
 * dlsym like frameworks do.  Prints the loop's wall time in nanoseconds. */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

/* The measured loop (callgrind collects inside this function only). */
__attribute__((noinline)) long alloc_free_loop(alloc_fn alloc, free_fn release, long n) {
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        if (alloc(&p, 1 << 20) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) return i;
    }
    return n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "alloc-loop: %s\n", dlerror()); return 1; }
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*setc)(CUcontext) = (CUresult (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))dlsym(lib, "cuMemAlloc_v2");
    CUresult (*release)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))dlsym(lib, "cuMemFree_v2");
    CUdevice dev;
    CUcontext ctx;
    if (!init || init(0) || get(&dev, 0) || retain(&ctx, dev) || setc(ctx)) { fprintf(stderr, "alloc-loop: setup failed\n"); return 1; }
    if (alloc_free_loop(alloc, release, 1) != 1) { fprintf(stderr, "alloc-loop: warm-up failed\n"); return 1; }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long done = alloc_free_loop(alloc, release, n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (done != n) { fprintf(stderr, "alloc-loop: failed at %ld\n", done); return 1; }
    printf("%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    return 0;
}
