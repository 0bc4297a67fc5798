/* The isolation shim's base layer (libgpushare-shim.so): its configuration
 * (shim_config.c) and the definitions every part shares.  Depends on libc only.
 *
 * The shim's parts, each with its own header, one way (make -C native check-layers):
 *
 *   shim_config.h  configuration, modes, faults          (libc)
 *   shim_usage.h   the container-wide accounting         (shim_config.h)
 *   shim_pool.h    the stream-ordered pools' accounting  (shim_usage.h, cuda.h)
 *   shim_cuda.h, shim_loader.h
 *                  the hooks (shim.c, shim_ctx.c, shim_vmm.c, shim_array.c,
 *                  shim_loader.c), on top of all three
 *
 * The accounting and the pools include no hooks' header: what the pools need of the
 * hooks is handed to them through shim_pool_host_t (shim_pool.h). */
#ifndef GPUSHARE_SHIM_CONFIG_H
#define GPUSHARE_SHIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define SHIM_MAX_DEVICES 64
#define HIDDEN __attribute__((visibility("hidden")))
#ifndef EXPORT
#define EXPORT __attribute__((visibility("default")))
#endif
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef enum {
    SHIM_PASSTHROUGH = 0, /* no limit variable set: forward everything untouched */
    SHIM_LIMITED = 1,     /* at least one limit in force */
    SHIM_BROKEN = 2,      /* malformed configuration: every CUDA/NVML call fails */
} shim_mode_t;

/* Deliberate faults (GPUSHARE_SHIM_FAULT, set only by the device plugin under --fault;
 * gpushare_stack/faults.py): each breaks one rule so the suite can show it notices. */
#define SHIM_FAULT_PER_PROCESS_BUDGET 1u /* each process gets its own usage file */
#define SHIM_FAULT_LEAK_FREES 2u         /* frees are never credited back */
#define SHIM_FAULT_NO_RECLAIM 4u         /* dead processes keep their memory */
#define SHIM_FAULT_UNGUARDED_MANAGED 8u  /* cuMemAllocManaged is passed through unaccounted */
#define SHIM_FAULT_EXACT_FIT_REFUSED 16u /* an allocation that fills the share to the byte is refused */
#define SHIM_FAULT_SMI_IGNORES_USAGE 32u /* NVML (nvidia-smi) shows the share free whatever is held */
#define SHIM_FAULT_ORDINAL_CARDS 64u     /* a CUDA ordinal is charged as that container card (CUDA_VISIBLE_DEVICES ignored) */
#define SHIM_FAULT_LOADER_UNHELD 128u    /* dlopen keeps RTLD_DEEPBIND, dlmopen opens new namespaces */
#define SHIM_FAULT_STREAM_CURRENT_CARD 256u /* a stream-ordered allocation is charged to the current card */
#define SHIM_FAULT_CONTEXTS_UNCHARGED 512u  /* CUDA contexts cost the share nothing */
#define SHIM_FAULT_VMM_RELEASE_FREES 1024u  /* cuMemRelease gives the share back while a mapping holds the memory */
#define SHIM_FAULT_EXEC_KEEPS_CHARGE 2048u  /* the ledger survives exec: a program started by exec finds its pid's charge */

/* The limit of a card the configuration gives none once any limit is given: a share of
 * one byte, so every allocation on it fails (fail closed, never "unlimited"). */
#define SHIM_REFUSED_LIMIT 1u

typedef struct {
    shim_mode_t mode;
    int from_file; /* read from the limits file the device plugin mounts (env ignored) */
    unsigned fault; /* SHIM_FAULT_* bits; 0 = a sound shim */
    uint64_t limit[SHIM_MAX_DEVICES]; /* bytes; 0 = no limit for this container card */
    char usage_file[512];
    char error[512]; /* why the configuration was refused (mode == SHIM_BROKEN) */
} shim_config_t;

/* Parse "4GiB", "4096MiB", "4096m", "1073741824B": bytes, or 0 with why set. */
HIDDEN uint64_t shim_parse_size(const char *value, const char **why);

/* Build the configuration from an environment (envp NULL-terminated). */
HIDDEN void shim_config_from_env(char *const *envp, shim_config_t *cfg);

/* The process-wide configuration, parsed once. */
HIDDEN const shim_config_t *shim_config(void);

/* Report a refused configuration on stderr, once per process. */
HIDDEN void shim_report_broken(void);

#endif
