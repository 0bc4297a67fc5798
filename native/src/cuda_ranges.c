/* Registry of the host memory that backs the mock's device memory, so that copies
 * and sets reach the bytes an allocation owns and a bad pointer is refused instead of
 * crashing.  A sorted array searched by binary search: allocations in flight are few,
 * and insertion in address order keeps lookups of interior pointers cheap. */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static cuda_range_t *g_ranges;
static size_t g_count, g_cap;

/* Index of the first range whose base is greater than p. */
static size_t upper_bound(uintptr_t p) {
    size_t lo = 0, hi = g_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_ranges[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int cuda_range_add(const cuda_range_t *r) {
    if (g_count == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 256;
        cuda_range_t *fresh = realloc(g_ranges, cap * sizeof *fresh);
        if (!fresh) return -1;
        g_ranges = fresh;
        g_cap = cap;
    }
    size_t i = upper_bound(r->base);
    memmove(&g_ranges[i + 1], &g_ranges[i], (g_count - i) * sizeof *g_ranges);
    g_ranges[i] = *r;
    g_count++;
    return 0;
}

cuda_range_t *cuda_range_find(uintptr_t p, size_t len) {
    size_t i = upper_bound(p);
    if (i == 0) return NULL;
    cuda_range_t *r = &g_ranges[i - 1];
    if (p - r->base >= r->size || len > r->size - (p - r->base)) return NULL;
    return r;
}

void cuda_range_remove(cuda_range_t *r) {
    size_t i = (size_t)(r - g_ranges);
    memmove(&g_ranges[i], &g_ranges[i + 1], (g_count - i - 1) * sizeof *g_ranges);
    g_count--;
}

void *cuda_backing_map(size_t len, int legacy32) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (legacy32) {
#if defined(__x86_64__)
        flags |= MAP_32BIT;
#else
        return NULL; /* no way to ask for a 32-bit address here */
#endif
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void cuda_backing_unmap(void *p, size_t len) { munmap(p, len); }
