/* Node-wide table of which processes hold device memory on which physical card,
 * kept by the mock CUDA library and read by the mock NVML library (the processes
 * nvmlDeviceGetComputeRunningProcesses and nvidia-smi list).
 *
 * The table is a small file mapped shared by every process of the node:
 * $GPUSHARE_MOCK_STATE_DIR/process-table (default directory /run/gpushare-mock when
 * it can be created there, else /tmp/gpushare-mock).  Each process owns one slot and
 * writes only its own counters; a slot whose pid is dead (SIGKILL included) or reused
 * is ignored by readers and reclaimed by the next process that needs a slot.
 * Compiled into both mock libraries (hidden visibility). */
#ifndef GPUSHARE_GPU_PROCESS_TABLE_H
#define GPUSHARE_GPU_PROCESS_TABLE_H

#define GPT_MAX_CARDS 64 /* physical indices 0..63, as INV_MAX_GPUS */

struct gpt_entry {
    unsigned pid;
    unsigned long long used_bytes;
};

/* Live processes holding memory (used_bytes > 0) on physical card physical_index,
 * at most max of them written to out, ordered by pid.  Returns the number of such
 * processes (which may exceed max: the caller's buffer was too small), 0 when the
 * table does not exist yet, -1 on a bad argument (index out of range, NULL out with
 * max > 0). */
__attribute__((visibility("hidden")))
int gpt_list(unsigned physical_index, struct gpt_entry *out, unsigned max);

/* Set what this process holds on physical card physical_index (bytes; 0 = nothing).
 * Takes a slot on first use.  0 on success, -1 if the table is unusable (the reason
 * is printed once on stderr; the caller carries on without a table). */
__attribute__((visibility("hidden")))
int gpt_set_used(unsigned physical_index, unsigned long long used_bytes);

/* Path of the table file (for messages and tests). */
__attribute__((visibility("hidden")))
const char *gpt_path(void);

#endif
