/* Tries every way a program can reach cuMemAlloc/cuMemGetInfo, to check that each
 * one still goes through the shim:
 *
 *   bypass-test order                    RTLD_NEXT stays relative to the caller
 *   bypass-test alloc HOW MIB            HOW: direct | dlsym-handle | rtld-default |
 *                                         rtld-next | proc | proc-v2
 * prints "total=<bytes> result=<CUDA error name>". */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpushare_order_probe(void);            /* from libbypass-helper.so (first) */
void *helper_rtld_next(const char *name); /* dlsym(RTLD_NEXT) issued from the helper */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *lookup(const char *how, const char *versioned, const char *base) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!strcmp(how, "direct")) return !strcmp(base, "cuMemAlloc") ? (void *)cuMemAlloc_v2 : (void *)cuMemGetInfo_v2;
    if (!strcmp(how, "dlsym-handle")) return dlsym(lib, versioned);
    if (!strcmp(how, "rtld-default")) return dlsym(RTLD_DEFAULT, versioned);
    if (!strcmp(how, "rtld-next")) return helper_rtld_next(versioned);
    void *p = NULL;
    if (!strcmp(how, "proc")) {
        gpa_fn gpa = (gpa_fn)dlsym(lib, "cuGetProcAddress");
        if (gpa && gpa(base, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) p = NULL;
        return p;
    }
    if (!strcmp(how, "proc-v2")) {
        CUdriverProcAddressQueryResult st;
        gpa2_fn gpa = (gpa2_fn)dlsym(lib, "cuGetProcAddress_v2");
        if (gpa && gpa(base, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS) p = NULL;
        return p;
    }
    fprintf(stderr, "bypass-test: unknown lookup '%s'\n", how);
    exit(64);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "order")) {
        int (*from_helper)(void) = (int (*)(void))helper_rtld_next("gpushare_order_probe");
        int (*from_main)(void) = (int (*)(void))dlsym(RTLD_NEXT, "gpushare_order_probe");
        int a = from_helper ? from_helper() : -1, b = from_main ? from_main() : -1;
        printf("helper-next=%d main-next=%d linked=%d\n", a, b, gpushare_order_probe());
        return a == 2 && b == 1 ? 0 : 1;
    }
    if (argc != 4 || strcmp(argv[1], "alloc") != 0) {
        fprintf(stderr, "usage: bypass-test order | alloc HOW MIB\n");
        return 64;
    }
    const char *how = argv[2];
    size_t mib = strtoul(argv[3], NULL, 10);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "bypass-test: cannot set up device 0\n");
        return 1;
    }
    alloc_fn alloc = (alloc_fn)lookup(how, "cuMemAlloc_v2", "cuMemAlloc");
    info_fn info = (info_fn)lookup(how, "cuMemGetInfo_v2", "cuMemGetInfo");
    if (!alloc || !info) {
        fprintf(stderr, "bypass-test: lookup '%s' found nothing\n", how);
        return 1;
    }
    size_t free_b = 0, total_b = 0;
    info(&free_b, &total_b);
    CUdeviceptr p = 0;
    CUresult rc = alloc(&p, mib << 20);
    const char *name = "?";
    cuGetErrorName(rc, &name);
    printf("total=%zu result=%s\n", total_b, name);
    if (rc == CUDA_SUCCESS) cuMemFree_v2(p);
    return 0;
}
