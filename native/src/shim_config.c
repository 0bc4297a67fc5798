/* Where the configuration comes from (docs/threat-model.md):
 *   the reference build reads SHIM_LIMITS_FILE (/etc/gpushare/limits), which the device
 *   plugin mounts read-only, whenever it is there, and then nothing from the
 *   environment: the workload cannot unset or raise its limits.  The file holds the
 *   variables below as NAME=value lines.  Without the file (the sandbox, tests), the
 *   environment is read.
 * Limit variables of docs/design.md ("Shim environment"):
 *   GPUSHARE_MEMORY_LIMIT_<i>  limit for container card i (wins over the next)
 *   GPUSHARE_MEMORY_LIMIT      limit for every card
 *   GPUSHARE_USAGE_FILE        shared accounting file (default /tmp/.gpushare-usage)
 *   GPUSHARE_SHIM_FAULT        a deliberate fault, comma list of per-process-budget,
 *                              leak-frees, no-reclaim, unguarded-managed, exact-fit-refused,
 *                              smi-ignores-usage, ordinal-cards, loader-unheld,
 *                              stream-current-card, contexts-uncharged, vmm-release-frees,
 *                              exec-keeps-charge: read only by the fault
 *                              build (SHIM_WITH_FAULTS, libgpushare-shim-faults.so, which the device
 *                              plugin uses under --fault); the shipped library ignores it
 * A malformed value refuses the whole configuration: never a silent "unlimited".  Once any
 * limit is given, a card without one is refused (a share of zero), never unlimited.
 *
 * The hami-like build (SHIM_HAMI_LIKE) reads HAMi-core's names instead:
 *   CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_MEMORY_LIMIT   (values like 4096m)
 *   CUDA_DEVICE_MEMORY_SHARED_CACHE                         (default /tmp/.hamilike-usage) */
#include "shim_config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

#ifdef SHIM_HAMI_LIKE
#define SHIM_LIMIT_VAR "CUDA_DEVICE_MEMORY_LIMIT"
#define SHIM_USAGE_FILE_VAR "CUDA_DEVICE_MEMORY_SHARED_CACHE"
#define SHIM_DEFAULT_USAGE_FILE "/tmp/.hamilike-usage"
#else
#define SHIM_LIMIT_VAR "GPUSHARE_MEMORY_LIMIT"
#define SHIM_USAGE_FILE_VAR "GPUSHARE_USAGE_FILE"
#define SHIM_DEFAULT_USAGE_FILE "/tmp/.gpushare-usage"
#ifndef SHIM_LIMITS_FILE
#define SHIM_LIMITS_FILE "/etc/gpushare/limits"
#endif
#endif

static const char UNITS_HELP[] = "expected an integer with unit B, KiB, MiB, GiB (or k, m, g)";

uint64_t shim_parse_size(const char *value, const char **why) {
    *why = UNITS_HELP;
    if (!value || value[0] < '0' || value[0] > '9') return 0;
    uint64_t n = 0;
    const char *p = value;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > (UINT64_MAX - 9) / 10) { *why = "value too large"; return 0; }
        n = n * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift;
    if (strcmp(p, "B") == 0) shift = 0;
    else if (strcmp(p, "KiB") == 0 || strcmp(p, "k") == 0 || strcmp(p, "K") == 0) shift = 10;
    else if (strcmp(p, "MiB") == 0 || strcmp(p, "m") == 0 || strcmp(p, "M") == 0) shift = 20;
    else if (strcmp(p, "GiB") == 0 || strcmp(p, "g") == 0 || strcmp(p, "G") == 0) shift = 30;
    else return 0;
    if (n == 0) { *why = "the limit must be greater than zero"; return 0; }
    if (shift && n > (UINT64_MAX >> shift)) { *why = "value too large"; return 0; }
    *why = NULL;
    return n << shift;
}

static void refuse(shim_config_t *cfg, const char *name, const char *value, const char *why) {
    if (cfg->mode == SHIM_BROKEN) return; /* keep the first problem */
    cfg->mode = SHIM_BROKEN;
    snprintf(cfg->error, sizeof cfg->error, "invalid %s='%s': %s", name, value, why);
}

void shim_config_from_env(char *const *envp, shim_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->usage_file, sizeof cfg->usage_file, SHIM_DEFAULT_USAGE_FILE);
    uint64_t all = 0;
    int have_any = 0, have_per[SHIM_MAX_DEVICES] = {0};
    static const char prefix[] = SHIM_LIMIT_VAR;
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        size_t klen = (size_t)(eq - *e);
        char name[128];
        if (klen >= sizeof name) continue;
        memcpy(name, *e, klen);
        name[klen] = '\0';
        const char *value = eq + 1;
        if (strcmp(name, "GPUSHARE_SHIM_FAULT") == 0) {
#ifndef SHIM_WITH_FAULTS
            continue; /* the shipped library has no faults to switch on */
#endif
            static const struct { const char *name; unsigned bit; } known[] = {
                {"per-process-budget", SHIM_FAULT_PER_PROCESS_BUDGET},
                {"leak-frees", SHIM_FAULT_LEAK_FREES},
                {"no-reclaim", SHIM_FAULT_NO_RECLAIM},
                {"unguarded-managed", SHIM_FAULT_UNGUARDED_MANAGED},
                {"exact-fit-refused", SHIM_FAULT_EXACT_FIT_REFUSED},
                {"smi-ignores-usage", SHIM_FAULT_SMI_IGNORES_USAGE},
                {"ordinal-cards", SHIM_FAULT_ORDINAL_CARDS},
                {"loader-unheld", SHIM_FAULT_LOADER_UNHELD},
                {"stream-current-card", SHIM_FAULT_STREAM_CURRENT_CARD},
                {"contexts-uncharged", SHIM_FAULT_CONTEXTS_UNCHARGED},
                {"vmm-release-frees", SHIM_FAULT_VMM_RELEASE_FREES},
                {"exec-keeps-charge", SHIM_FAULT_EXEC_KEEPS_CHARGE},
            };
            const char *p = value;
            while (*p) {
                size_t len = strcspn(p, ",");
                unsigned bit = 0;
                for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
                    if (strlen(known[k].name) == len && strncmp(p, known[k].name, len) == 0) bit = known[k].bit;
                if (!bit) {
                    refuse(cfg, name, value, "expected per-process-budget, leak-frees, no-reclaim, unguarded-managed, exact-fit-refused, "
                                            "smi-ignores-usage, ordinal-cards, loader-unheld, stream-current-card, "
                                            "contexts-uncharged, vmm-release-frees or exec-keeps-charge");
                    break;
                }
                cfg->fault |= bit;
                p += len;
                if (*p == ',') p++;
            }
            continue;
        }
        if (strcmp(name, SHIM_USAGE_FILE_VAR) == 0) {
            if (value[0] != '/' || strlen(value) >= sizeof cfg->usage_file)
                refuse(cfg, name, value, "expected an absolute path");
            else
                snprintf(cfg->usage_file, sizeof cfg->usage_file, "%s", value);
            continue;
        }
        if (strncmp(name, prefix, sizeof prefix - 1) != 0) continue;
        const char *suffix = name + sizeof prefix - 1;
        const char *why;
        if (*suffix == '\0') {
            all = shim_parse_size(value, &why);
            if (why) refuse(cfg, name, value, why);
            have_any = 1;
            continue;
        }
        if (*suffix != '_') continue; /* another variable sharing the prefix */
        suffix++;
        char *end;
        errno = 0;
        long idx = strtol(suffix, &end, 10);
        if (!*suffix || *end || errno || idx < 0 || idx >= SHIM_MAX_DEVICES || (suffix[0] == '0' && suffix[1])) {
            refuse(cfg, name, value, "the suffix must be a card index 0..63");
            continue;
        }
        uint64_t bytes = shim_parse_size(value, &why);
        if (why) {
            refuse(cfg, name, value, why);
            continue;
        }
        cfg->limit[idx] = bytes;
        have_per[idx] = 1;
        have_any = 1;
    }
    if (cfg->mode == SHIM_BROKEN) return;
    for (int i = 0; i < SHIM_MAX_DEVICES; i++)
#ifdef SHIM_LIMITS_FILE
        if (!have_per[i]) cfg->limit[i] = all ? all : SHIM_REFUSED_LIMIT; /* fail closed */
#else
        if (!have_per[i]) cfg->limit[i] = all; /* HAMi-core: a card without a limit has none */
#endif
    cfg->mode = have_any ? SHIM_LIMITED : SHIM_PASSTHROUGH;
}

#ifdef SHIM_LIMITS_FILE
/* The configuration from the read-only limits file; 0 when there is no such file (then
 * the environment is read).  A file that is there but unreadable refuses every call. */
static int config_from_file(const char *path, shim_config_t *cfg) {
    static char text[16384];
    static char *lines[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) return 0;
    memset(cfg, 0, sizeof *cfg);
    cfg->from_file = 1;
    const char *why = NULL;
    struct stat st;
    ssize_t n = -1;
    if (fd < 0) why = strerror(errno);
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) why = "not a regular file";
    else if ((n = read(fd, text, sizeof text - 1)) < 0) why = strerror(errno);
    else if ((size_t)n == sizeof text - 1) why = "larger than 16 KiB";
    if (fd >= 0) close(fd);
    if (why) {
        cfg->mode = SHIM_BROKEN;
        snprintf(cfg->error, sizeof cfg->error, "limits file %s: %s", path, why);
        return 1;
    }
    text[n] = '\0';
    size_t count = 0;
    for (char *p = text; *p && count < sizeof lines / sizeof lines[0] - 1;) {
        char *end = strchr(p, '\n');
        if (end) *end = '\0';
        if (*p && *p != '#') lines[count++] = p;
        if (!end) break;
        p = end + 1;
    }
    lines[count] = NULL;
    shim_config_from_env(lines, cfg);
    cfg->from_file = 1;
    if (cfg->mode == SHIM_PASSTHROUGH) { /* a limits file that limits nothing */
        cfg->mode = SHIM_BROKEN;
        snprintf(cfg->error, sizeof cfg->error, "limits file %s gives no limit", path);
    }
    return 1;
}
#endif

static shim_config_t g_config;
static pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

static void load_config(void) {
#ifdef SHIM_LIMITS_FILE
    if (config_from_file(SHIM_LIMITS_FILE, &g_config)) return; /* the environment is not read */
#endif
    shim_config_from_env(environ, &g_config);
}

const shim_config_t *shim_config(void) {
    pthread_once(&g_config_once, load_config);
    return &g_config;
}

void shim_report_broken(void) {
    static int reported;
    if (__atomic_exchange_n(&reported, 1, __ATOMIC_ACQ_REL)) return;
    char line[640];
    int n = snprintf(line, sizeof line, "gpushare-shim: %s; refusing all CUDA and NVML calls\n", shim_config()->error);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}
