/* Internal interfaces of the isolation shim (libgpushare-shim.so). */
#ifndef GPUSHARE_SHIM_H
#define GPUSHARE_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define SHIM_MAX_DEVICES 64
#define HIDDEN __attribute__((visibility("hidden")))

typedef enum {
    SHIM_PASSTHROUGH = 0, /* no limit variable set: forward everything untouched */
    SHIM_LIMITED = 1,     /* at least one limit in force */
    SHIM_BROKEN = 2,      /* malformed configuration: every CUDA/NVML call fails */
} shim_mode_t;

typedef struct {
    shim_mode_t mode;
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

/* ---- container-wide usage accounting (shim_usage.c) ---- */

/* Reserve bytes on container card dev against limit; 0 on success, -1 when it would
 * exceed the limit (after reclaiming dead processes), -2 when accounting is unusable. */
HIDDEN int usage_reserve(int dev, uint64_t bytes, uint64_t limit);
HIDDEN void usage_release(int dev, uint64_t bytes);
/* Bytes in use on container card dev by all live processes of the container. */
HIDDEN uint64_t usage_of(int dev);
HIDDEN void usage_forget_process(void); /* after fork, in the child */
HIDDEN void usage_exit(void);

#endif
