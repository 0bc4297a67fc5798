/* YAML plumbing for the inventory and the model profiles (see inventory_yaml.h).
 * Every scalar is read as text and checked here, so a value means the same whatever
 * its YAML style (plain, quoted, flow or block). */
#include "inventory_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int inv_fail(char *err, size_t errlen, const char *path, int line, const char *fmt, ...) {
    char msg[1024];
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

int inv_line(const yaml_node_t *node) { return node ? (int)node->start_mark.line + 1 : 0; }

/* Does line `line` (0-based) of text hold a tab?  Explains libyaml's terse refusal. */
static int line_has_tab(const char *text, size_t line) {
    const char *p = text;
    for (size_t i = 0; i < line && p; i++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return 0;
    size_t len = strcspn(p, "\n");
    return memchr(p, '\t', len) != NULL;
}

int inv_yaml_load(const char *text, const char *path, yaml_document_t *doc, char *err, size_t errlen) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return inv_fail(err, errlen, path, 0, "cannot start the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    int rc = 0;
    if (!yaml_parser_load(&parser, doc)) {
        size_t line = parser.problem_mark.line;
        const char *problem = parser.problem ? parser.problem : "malformed YAML";
        if (line_has_tab(text, line))
            rc = inv_fail(err, errlen, path, (int)line + 1, "tab character (indent with spaces): %s", problem);
        else if (parser.context)
            rc = inv_fail(err, errlen, path, (int)line + 1, "YAML syntax error: %s %s", problem, parser.context);
        else
            rc = inv_fail(err, errlen, path, (int)line + 1, "YAML syntax error: %s", problem);
        yaml_parser_delete(&parser);
        return rc;
    }
    /* A second document is refused, as one inventory is one node. */
    yaml_document_t extra;
    if (yaml_document_get_root_node(doc) && yaml_parser_load(&parser, &extra)) {
        yaml_node_t *root = yaml_document_get_root_node(&extra);
        if (root) rc = inv_fail(err, errlen, path, (int)extra.start_mark.line + 1, "more than one YAML document");
        yaml_document_delete(&extra);
    } else if (parser.error != YAML_NO_ERROR) {
        rc = inv_fail(err, errlen, path, (int)parser.problem_mark.line + 1, "YAML syntax error: %s",
                      parser.problem ? parser.problem : "malformed YAML");
    }
    yaml_parser_delete(&parser);
    if (rc != 0) yaml_document_delete(doc);
    return rc;
}

const char *inv_scalar(const yaml_node_t *node) {
    if (!node || node->type != YAML_SCALAR_NODE) return NULL;
    return (const char *)node->data.scalar.value;
}

int inv_check_keys(yaml_document_t *doc, yaml_node_t *map, const char *ctx, const char *path, char *err,
                   size_t errlen) {
    const char *sep = *ctx ? ": " : "";
    for (yaml_node_pair_t *a = map->data.mapping.pairs.start; a < map->data.mapping.pairs.top; a++) {
        yaml_node_t *ka = yaml_document_get_node(doc, a->key);
        const char *sa = inv_scalar(ka);
        if (!sa) return inv_fail(err, errlen, path, inv_line(ka), "%s%skeys must be plain words", ctx, sep);
        for (yaml_node_pair_t *b = map->data.mapping.pairs.start; b < a; b++)
            if (strcmp(sa, inv_scalar(yaml_document_get_node(doc, b->key))) == 0)
                return inv_fail(err, errlen, path, inv_line(ka), "%s%sduplicate key '%s'", ctx, sep, sa);
    }
    return 0;
}

/* ---- the profile field table ----------------------------------------------------- */

typedef enum { F_NAME, F_MIB, F_UINT, F_HEX32, F_CC, F_ARCH, F_BRAND, F_BOOL } ftype_t;

typedef struct {
    const char *key;
    ftype_t type;
    size_t off;
} field_t;

#define F(key, type) {#key, type, offsetof(gpu_model_t, key)}
static const field_t FIELDS[] = {
    F(name, F_NAME),
    F(memory_mib, F_MIB),
    F(architecture, F_ARCH),
    F(brand, F_BRAND),
    {"compute_capability", F_CC, offsetof(gpu_model_t, cc_major)},
    F(sm_count, F_UINT),
    F(pci_device_id, F_HEX32),
    F(pci_subsystem_id, F_HEX32),
    F(clock_graphics_max_mhz, F_UINT),
    F(clock_sm_max_mhz, F_UINT),
    F(clock_memory_max_mhz, F_UINT),
    F(clock_video_max_mhz, F_UINT),
    F(clock_graphics_default_mhz, F_UINT),
    F(clock_memory_default_mhz, F_UINT),
    F(clock_graphics_idle_mhz, F_UINT),
    F(clock_memory_idle_mhz, F_UINT),
    F(power_limit_w, F_UINT),
    F(power_min_limit_w, F_UINT),
    F(power_max_limit_w, F_UINT),
    F(power_idle_w, F_UINT),
    F(bar1_mib, F_UINT),
    F(pcie_generation, F_UINT),
    F(pcie_width, F_UINT),
    F(memory_bus_width, F_UINT),
    F(temp_idle_c, F_UINT),
    F(temp_slowdown_c, F_UINT),
    F(temp_shutdown_c, F_UINT),
    F(temp_max_operating_c, F_UINT),
    F(fans, F_UINT),
    F(fan_speed_percent, F_UINT),
    F(ecc, F_BOOL),
    F(mig, F_BOOL),
};
#undef F
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])
_Static_assert(NFIELDS <= 64, "the set mask has 64 bits");

/* The words NVML has an enum value for (nvmlDeviceArchitecture_t, nvmlBrandType_t). */
static const char *const ARCHITECTURES[] = {"kepler", "maxwell", "pascal", "volta", "turing",
                                            "ampere", "ada", "hopper", "blackwell", NULL};
static const char *const BRANDS[] = {"tesla", "nvidia", "geforce", "quadro", "titan", "nvidia_rtx", "quadro_rtx", NULL};

static int in_list(const char *v, const char *const *list) {
    for (; *list; list++)
        if (strcmp(v, *list) == 0) return 1;
    return 0;
}

static const char *join(const char *const *list) {
    static __thread char buf[256];
    buf[0] = '\0';
    for (; *list; list++) {
        if (buf[0]) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
        strncat(buf, *list, sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

/* Decimal digits only, at most max. */
static int parse_uint(const char *v, unsigned long long max, unsigned long long *out) {
    size_t n = strlen(v);
    if (n == 0 || n > 15 || strspn(v, "0123456789") != n) return -1;
    unsigned long long x = strtoull(v, NULL, 10);
    if (x > max) return -1;
    *out = x;
    return 0;
}

static int parse_hex32(const char *v, unsigned int *out) {
    unsigned long long x;
    if ((v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))) {
        size_t n = strlen(v + 2);
        if (n == 0 || n > 8 || strspn(v + 2, "0123456789abcdefABCDEF") != n) return -1;
        *out = (unsigned int)strtoul(v + 2, NULL, 16);
        return 0;
    }
    if (parse_uint(v, 0xffffffffULL, &x) != 0) return -1;
    *out = (unsigned int)x;
    return 0;
}

/* "7.0" -> 7, 0 (major 1..99, minor 0..9). */
static int parse_cc(const char *v, int *major, int *minor) {
    size_t n = strlen(v);
    const char *dot = strchr(v, '.');
    if (!dot || dot == v || dot - v > 2 || n - (size_t)(dot - v) != 2 || strspn(v, "0123456789") != (size_t)(dot - v) ||
        !(dot[1] >= '0' && dot[1] <= '9'))
        return -1;
    *major = atoi(v);
    *minor = dot[1] - '0';
    return *major > 0 ? 0 : -1;
}

int model_field_parse(gpu_model_t *m, const char *ctx, const char *key, yaml_node_t *value, const char *path,
                      char *err, size_t errlen) {
    size_t i = 0;
    while (i < NFIELDS && strcmp(FIELDS[i].key, key) != 0) i++;
    if (i == NFIELDS) return 0;
    const field_t *f = &FIELDS[i];
    char *base = (char *)m + f->off;
    int line = inv_line(value);
    const char *v = inv_scalar(value);
    if (!v) return inv_fail(err, errlen, path, line, "%s.%s: expected a single value", ctx, key);
    unsigned long long x;
    switch (f->type) {
    case F_NAME:
        if (!*v || strlen(v) >= GPU_MODEL_NAME_LEN)
            return inv_fail(err, errlen, path, line, "%s.%s: expected text of 1 to %d characters, got '%s'", ctx, key,
                            GPU_MODEL_NAME_LEN - 1, v);
        strcpy(base, v);
        break;
    case F_MIB:
        if (parse_uint(v, 1ULL << 40, &x) != 0 || x == 0)
            return inv_fail(err, errlen, path, line, "%s.%s: expected a positive integer (MiB), got '%s'", ctx, key, v);
        *(unsigned long long *)base = x;
        break;
    case F_UINT:
        if (parse_uint(v, 1000000, &x) != 0)
            return inv_fail(err, errlen, path, line, "%s.%s: expected an integer from 0 to 1000000, got '%s'", ctx,
                            key, v);
        *(unsigned int *)base = (unsigned int)x;
        break;
    case F_HEX32:
        if (parse_hex32(v, (unsigned int *)base) != 0)
            return inv_fail(err, errlen, path, line, "%s.%s: expected a 32-bit id like \"0x1DB110DE\", got '%s'", ctx,
                            key, v);
        break;
    case F_CC:
        if (parse_cc(v, &m->cc_major, &m->cc_minor) != 0)
            return inv_fail(err, errlen, path, line, "%s.%s: expected \"MAJOR.MINOR\" like \"7.0\", got '%s'", ctx,
                            key, v);
        break;
    case F_ARCH:
    case F_BRAND: {
        const char *const *list = f->type == F_ARCH ? ARCHITECTURES : BRANDS;
        if (!in_list(v, list))
            return inv_fail(err, errlen, path, line, "%s.%s: expected one of %s, got '%s'", ctx, key, join(list), v);
        snprintf(base, GPU_MODEL_WORD_LEN, "%s", v);
        break;
    }
    case F_BOOL:
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return inv_fail(err, errlen, path, line, "%s.%s: expected true or false, got '%s'", ctx, key, v);
        *(int *)base = strcmp(v, "true") == 0;
        break;
    }
    m->set |= 1ULL << i;
    return 1;
}

void model_overlay(gpu_model_t *dst, const gpu_model_t *src) {
    for (size_t i = 0; i < NFIELDS; i++) {
        if (!(src->set & (1ULL << i))) continue;
        const field_t *f = &FIELDS[i];
        size_t size;
        switch (f->type) {
        case F_NAME: size = GPU_MODEL_NAME_LEN; break;
        case F_ARCH:
        case F_BRAND: size = GPU_MODEL_WORD_LEN; break;
        case F_MIB: size = sizeof(unsigned long long); break;
        case F_CC: size = 2 * sizeof(int); break;
        case F_BOOL: size = sizeof(int); break;
        default: size = sizeof(unsigned int); break;
        }
        memcpy((char *)dst + f->off, (const char *)src + f->off, size);
        dst->set |= 1ULL << i;
    }
}

void model_derive(gpu_model_t *m) {
    m->clock_khz = (int)m->clock_sm_max_mhz * 1000;
    m->power_limit_mw = m->power_limit_w * 1000;
}

const char *model_field_names(void) {
    static __thread char buf[1024];
    if (!buf[0])
        for (size_t i = 0; i < NFIELDS; i++) {
            if (i) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
            strncat(buf, FIELDS[i].key, sizeof buf - strlen(buf) - 1);
        }
    return buf;
}
