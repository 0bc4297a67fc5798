/* A library placed between the shim and libcuda.so.1 in the global search order.
 * Without the shim's dlsym hook, dlsym(RTLD_NEXT, "cuMemAlloc_v2") from here would
 * return the driver's function and skip the shim. */
#include <dlfcn.h>

__attribute__((visibility("default"))) int gpushare_order_probe(void) { return 1; }

/* Not a tail call: dlsym must see this library as its caller. */
__attribute__((visibility("default"), optimize("no-optimize-sibling-calls"))) void *helper_rtld_next(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
