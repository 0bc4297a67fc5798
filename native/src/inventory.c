/* Parser for exactly the inventory subset of docs/design.md ("Mock inventory"):
 *
 *   driver_version: "470.82.01"
 *   cuda_version: "11.4"
 *   gpus:
 *     - name: Tesla V100-SXM2-16GB
 *       memory_mib: 16160
 *       uuid: GPU-...              # optional
 *       pci_bus_id: 00000000:00:07.0   # optional
 *
 * Anything else is an error that names the file and line, never a silent default. */
#include "inventory.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *path, int line, const char *fmt, ...) {
    char msg[INV_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(err, errlen, "%s:%d: %s", path, line, msg);
    else
        snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
}

/* Strip a trailing comment (a '#' at the start or after blank, outside quotes). */
static void strip_comment(char *s) {
    char quote = 0;
    for (char *p = s; *p; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if (*p == '#' && (p == s || p[-1] == ' ')) {
            *p = '\0';
            return;
        }
    }
}

static char *trim(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
    return s;
}

/* Unquote a scalar in place; -1 when a quote is not closed. */
static int unquote(char *s) {
    size_t n = strlen(s);
    if (n > 0 && (s[0] == '"' || s[0] == '\'')) {
        if (n < 2 || s[n - 1] != s[0]) return -1;
        memmove(s, s + 1, n - 2);
        s[n - 2] = '\0';
    }
    return 0;
}

static int copy_field(char *dst, size_t dstlen, const char *value) {
    if (strlen(value) >= dstlen) return -1;
    strcpy(dst, value);
    return 0;
}

/* Normalise "0000:00:07.0" or "00000000:00:07.0" to NVML's 8-digit upper-case form. */
static int normalise_bus_id(const char *in, char *out, size_t outlen) {
    unsigned int domain, bus, dev, fn;
    char tail;
    const char *colon = strchr(in, ':');
    if (!colon) return -1;
    size_t dlen = (size_t)(colon - in);
    if (dlen != 4 && dlen != 8) return -1;
    for (const char *p = in; *p; p++)
        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.') return -1;
    if (sscanf(in, "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4) return -1;
    if (bus > 0xff || dev > 0x1f || fn > 7) return -1;
    snprintf(out, outlen, "%08X:%02X:%02X.%X", domain, bus, dev, fn);
    return 0;
}

static unsigned long long fnv1a(const char *s, unsigned long long h) {
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static unsigned long long mix64(unsigned long long z) { /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void derive_uuid(const inv_gpu_t *g, unsigned int index, char *out, size_t outlen) {
    char seed[INV_NAME_LEN + 16];
    snprintf(seed, sizeof seed, "%s#%u", g->name, index);
    unsigned long long a = mix64(fnv1a(seed, 14695981039346656037ULL));
    unsigned long long b = mix64(a ^ 0x9e3779b97f4a7c15ULL);
    snprintf(out, outlen, "GPU-%08llx-%04llx-%04llx-%04llx-%012llx", a >> 32, (a >> 16) & 0xffff,
             a & 0xffff, b >> 48, b & 0xffffffffffffULL);
}

static int parse_cuda_version(const char *s, int *out) {
    int major = 0, minor = 0;
    char tail;
    int n = sscanf(s, "%d.%d%c", &major, &minor, &tail);
    if (n != 2 || major <= 0 || minor < 0 || minor > 99) return -1;
    *out = major * 1000 + minor * 10;
    return 0;
}

static int finish_gpu(inventory_t *inv, const char *path, int item_line, char *err, size_t errlen) {
    inv_gpu_t *g = &inv->gpus[inv->gpu_count - 1];
    unsigned int i = inv->gpu_count - 1;
    if (!g->name[0]) return fail(err, errlen, path, item_line, "gpus[%u]: missing required key 'name'", i);
    if (!g->memory_mib)
        return fail(err, errlen, path, item_line, "gpus[%u]: missing required key 'memory_mib'", i);
    if (!g->uuid[0]) derive_uuid(g, i, g->uuid, sizeof g->uuid);
    if (!g->pci_bus_id[0]) snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:00:%02X.0", 7 + i);
    g->physical_index = i;
    return 0;
}

int inventory_parse_text(const char *text, const char *path, inventory_t *inv, char *err, size_t errlen) {
    memset(inv, 0, sizeof *inv);
    enum { TOP, IN_GPUS } state = TOP;
    int have_gpus = 0, item_line = 0, item_indent = -1;
    int lineno = 0;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[1024];
        lineno++;
        if (len >= sizeof buf) return fail(err, errlen, path, lineno, "line too long");
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = eol ? eol + 1 : p + len;

        if (strchr(buf, '\t')) return fail(err, errlen, path, lineno, "tab character (indent with spaces)");
        strip_comment(buf);
        int indent = 0;
        while (buf[indent] == ' ') indent++;
        char *line = trim(buf);
        if (!*line) continue;
        if (lineno == 1 && strcmp(line, "---") == 0) continue;

        int is_item = 0;
        if (line[0] == '-' && (line[1] == ' ' || line[1] == '\0')) {
            is_item = 1;
            line = trim(line + 1);
        }
        if (indent == 0 && !is_item) state = TOP;

        char *colon = strchr(line, ':');
        if (!colon || (colon[1] != ' ' && colon[1] != '\0'))
            return fail(err, errlen, path, lineno, "expected 'key: value', got '%s'", line);
        *colon = '\0';
        char *key = trim(line);
        char *value = trim(colon + 1);
        if (unquote(value) != 0) return fail(err, errlen, path, lineno, "unterminated quote in value of '%s'", key);

        if (state == TOP) {
            if (indent != 0 || is_item)
                return fail(err, errlen, path, lineno, "unexpected indented entry '%s' outside 'gpus'", key);
            if (strcmp(key, "driver_version") == 0) {
                if (!*value || copy_field(inv->driver_version, sizeof inv->driver_version, value) != 0)
                    return fail(err, errlen, path, lineno, "driver_version: invalid value '%s'", value);
                int major;
                if (sscanf(inv->driver_version, "%d", &major) != 1 || major <= 0)
                    return fail(err, errlen, path, lineno,
                                "driver_version: expected a version like \"470.82.01\", got '%s'", value);
            } else if (strcmp(key, "cuda_version") == 0) {
                if (copy_field(inv->cuda_version, sizeof inv->cuda_version, value) != 0 ||
                    parse_cuda_version(value, &inv->cuda_version_int) != 0)
                    return fail(err, errlen, path, lineno,
                                "cuda_version: expected a version like \"11.4\", got '%s'", value);
            } else if (strcmp(key, "gpus") == 0) {
                if (have_gpus) return fail(err, errlen, path, lineno, "duplicate key 'gpus'");
                have_gpus = 1;
                if (strcmp(value, "[]") == 0) continue;
                if (*value) return fail(err, errlen, path, lineno, "gpus: expected a list, got '%s'", value);
                state = IN_GPUS;
            } else {
                return fail(err, errlen, path, lineno, "unknown key '%s' (expected driver_version, cuda_version, gpus)", key);
            }
            continue;
        }

        /* state == IN_GPUS */
        if (is_item) {
            if (inv->gpu_count > 0 && finish_gpu(inv, path, item_line, err, errlen) != 0) return -1;
            if (inv->gpu_count >= INV_MAX_GPUS)
                return fail(err, errlen, path, lineno, "more than %d gpus", INV_MAX_GPUS);
            inv->gpu_count++;
            item_line = lineno;
            item_indent = indent + 2;
        } else {
            if (inv->gpu_count == 0)
                return fail(err, errlen, path, lineno, "expected a list item ('- name: ...') under gpus");
            if (indent != item_indent)
                return fail(err, errlen, path, lineno, "key '%s' is not aligned with its list item", key);
        }
        inv_gpu_t *g = &inv->gpus[inv->gpu_count - 1];
        unsigned int gi = inv->gpu_count - 1;
        if (strcmp(key, "name") == 0) {
            if (!*value || copy_field(g->name, sizeof g->name, value) != 0)
                return fail(err, errlen, path, lineno, "gpus[%u].name: invalid value '%s'", gi, value);
        } else if (strcmp(key, "memory_mib") == 0) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(value, &end, 10);
            if (!*value || *end || errno || v == 0 || value[0] == '-' || v > (1ULL << 40))
                return fail(err, errlen, path, lineno,
                            "gpus[%u].memory_mib: expected a positive integer (MiB), got '%s'", gi, value);
            g->memory_mib = v;
        } else if (strcmp(key, "uuid") == 0) {
            if (strncmp(value, "GPU-", 4) != 0 || strlen(value) < 8 ||
                copy_field(g->uuid, sizeof g->uuid, value) != 0)
                return fail(err, errlen, path, lineno, "gpus[%u].uuid: expected 'GPU-...', got '%s'", gi, value);
        } else if (strcmp(key, "pci_bus_id") == 0) {
            if (normalise_bus_id(value, g->pci_bus_id, sizeof g->pci_bus_id) != 0)
                return fail(err, errlen, path, lineno,
                            "gpus[%u].pci_bus_id: expected 'DDDDDDDD:BB:DD.F' (hex), got '%s'", gi, value);
        } else {
            return fail(err, errlen, path, lineno,
                        "gpus[%u]: unknown key '%s' (expected name, memory_mib, uuid, pci_bus_id)", gi, key);
        }
    }
    if (state == IN_GPUS && inv->gpu_count > 0 && finish_gpu(inv, path, item_line, err, errlen) != 0) return -1;
    if (!inv->driver_version[0]) return fail(err, errlen, path, 0, "missing required key 'driver_version'");
    if (!inv->cuda_version[0]) return fail(err, errlen, path, 0, "missing required key 'cuda_version'");
    if (!have_gpus) return fail(err, errlen, path, 0, "missing required key 'gpus'");
    for (unsigned int a = 0; a < inv->gpu_count; a++)
        for (unsigned int b = a + 1; b < inv->gpu_count; b++) {
            if (strcasecmp(inv->gpus[a].uuid, inv->gpus[b].uuid) == 0)
                return fail(err, errlen, path, 0, "gpus[%u] and gpus[%u] share uuid '%s'", a, b, inv->gpus[a].uuid);
            if (strcmp(inv->gpus[a].pci_bus_id, inv->gpus[b].pci_bus_id) == 0)
                return fail(err, errlen, path, 0, "gpus[%u] and gpus[%u] share pci_bus_id '%s'", a, b,
                            inv->gpus[a].pci_bus_id);
        }
    return 0;
}

int inventory_parse_file(const char *path, inventory_t *inv, char *err, size_t errlen) {
    FILE *f = fopen(path, "re");
    if (!f) return fail(err, errlen, path, 0, "cannot open: %s", strerror(errno));
    char text[64 * 1024];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int too_big = !feof(f);
    fclose(f);
    if (too_big) return fail(err, errlen, path, 0, "file larger than %zu bytes", sizeof text - 1);
    text[n] = '\0';
    if (memchr(text, '\0', n)) return fail(err, errlen, path, 0, "file contains a NUL byte");
    return inventory_parse_text(text, path, inv, err, errlen);
}

int inventory_apply_visible(const inventory_t *physical, const char *visible, inventory_t *view, char *err,
                            size_t errlen) {
    *view = *physical;
    if (visible == NULL || strcmp(visible, "all") == 0) return 0;
    view->gpu_count = 0;
    if (visible[0] == '\0' || strcmp(visible, "none") == 0 || strcmp(visible, "void") == 0) return 0;
    char list[1024];
    if (strlen(visible) >= sizeof list) {
        snprintf(err, errlen, "NVIDIA_VISIBLE_DEVICES: value too long");
        return -1;
    }
    strcpy(list, visible);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        int found = -1;
        char *end;
        errno = 0;
        unsigned long idx = strtoul(tok, &end, 10);
        if (*tok && isdigit((unsigned char)tok[0]) && !*end && !errno) {
            if (idx < physical->gpu_count) found = (int)idx;
        } else {
            for (unsigned int i = 0; i < physical->gpu_count; i++)
                if (strcasecmp(physical->gpus[i].uuid, tok) == 0) found = (int)i;
        }
        if (found < 0) {
            snprintf(err, errlen, "NVIDIA_VISIBLE_DEVICES='%s': no card '%s' in the inventory (%u cards)", visible,
                     tok, physical->gpu_count);
            return -1;
        }
        for (unsigned int j = 0; j < view->gpu_count; j++)
            if (view->gpus[j].physical_index == (unsigned int)found) {
                snprintf(err, errlen, "NVIDIA_VISIBLE_DEVICES='%s': card '%s' listed twice", visible, tok);
                return -1;
            }
        view->gpus[view->gpu_count++] = physical->gpus[found];
    }
    return 0;
}

int inventory_load_container_view(inventory_t *view, char *err, size_t errlen) {
    const char *path = getenv("GPUSHARE_MOCK_INVENTORY");
    if (!path || !*path) {
        snprintf(err, errlen, "GPUSHARE_MOCK_INVENTORY is not set (path of the mock inventory YAML)");
        return -1;
    }
    static inventory_t physical; /* large: keep off the stack */
    if (inventory_parse_file(path, &physical, err, errlen) != 0) return -1;
    return inventory_apply_visible(&physical, getenv("NVIDIA_VISIBLE_DEVICES"), view, err, errlen);
}
