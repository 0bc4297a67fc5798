/* Per-card accounting of the mock driver: what this process holds on each card
 * (device allocations, pool reserves, physical VMM allocations) and how many
 * contexts it has there (each card with a context costs the context reserve).  An
 * allocation that does not fit in the card fails, as on a real card.  The total is
 * published in the node's process table after every change. */
#include "cuda_internal.h"
#include "gpu_process_table.h"

pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t g_used[INV_MAX_GPUS];
static int g_contexts[INV_MAX_GPUS];

uint64_t cuda_card_size(int dev) { return cuda_view.gpus[dev].memory_mib * MIB; }

uint64_t cuda_card_taken(int dev) { return g_used[dev] + (g_contexts[dev] ? CONTEXT_RESERVE_BYTES : 0); }

static void publish(int dev) { gpt_set_used(cuda_view.gpus[dev].physical_index, cuda_card_taken(dev)); }

int cuda_card_take(int dev, uint64_t bytes) {
    uint64_t card = cuda_card_size(dev), taken = cuda_card_taken(dev);
    if (bytes > card || taken + bytes > card) return -1;
    g_used[dev] += bytes;
    publish(dev);
    return 0;
}

void cuda_card_give(int dev, uint64_t bytes) {
    g_used[dev] = bytes > g_used[dev] ? 0 : g_used[dev] - bytes;
    publish(dev);
}

int cuda_card_context(int dev, int delta) {
    pthread_mutex_lock(&cuda_lock);
    int rc = 0;
    if (delta > 0 && g_contexts[dev] == 0 && g_used[dev] + CONTEXT_RESERVE_BYTES > cuda_card_size(dev))
        rc = -1;
    else
        g_contexts[dev] += delta;
    if (rc == 0) publish(dev);
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}
