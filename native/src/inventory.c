/* The inventory document of docs/design.md ("Mock inventory"), read with libyaml so
 * any YAML style works (block, flow, quoted, anchors):
 *
 *   driver_version: "470.82.01"
 *   cuda_version: "11.4"            # optional: derived from the driver branch
 *   gpus:
 *     - name: Tesla V100-SXM2-16GB
 *       memory_mib: 16160
 *       uuid: GPU-...                # optional
 *       pci_bus_id: 00000000:00:07.0 # optional
 *       lost: true                   # optional: fallen off the bus (NVML_ERROR_GPU_IS_LOST)
 *       xid: 48                      # optional: the card's last Xid error (0: none; a change
 *                                    # is an nvmlEventTypeXidCriticalError event)
 *     - model: A100-SXM4-40GB        # a profile of gpu-models.yaml; fields override it
 *
 * Anything else is an error that names the file, line and field, never a silent
 * default.  fixtures/inventory.py applies the same rules on the Python side. */
#include "inventory.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventory_yaml.h"

#define fail inv_fail

static char *trim(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
    return s;
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

/* "11.4" -> 11040: 1-3 digits, a dot, 1-2 digits (strict, as fixtures/inventory.py). */
static int parse_cuda_version(const char *s, int *out) {
    size_t a = strspn(s, "0123456789");
    if (a < 1 || a > 3 || s[a] != '.') return -1;
    size_t b = strspn(s + a + 1, "0123456789");
    if (b < 1 || b > 2 || s[a + 1 + b] != '\0') return -1;
    int major = atoi(s), minor = atoi(s + a + 1);
    if (major <= 0) return -1;
    *out = major * 1000 + minor * 10;
    return 0;
}

/* Total MiB of a profile under this driver (older drivers reserve more). */
static unsigned long long memory_for_driver(const gpu_model_t *m, unsigned int driver_major) {
    unsigned long long mib = m->memory_mib;
    unsigned int best = 0;
    for (unsigned int i = 0; i < m->before_count; i++)
        if (driver_major < m->before[i].driver_major && (best == 0 || m->before[i].driver_major < best)) {
            best = m->before[i].driver_major;
            mib = m->before[i].memory_mib;
        }
    return mib;
}

typedef struct {
    yaml_document_t *doc;
    const char *path;
    char *err;
    size_t errlen;
} pctx_t;

static const char *key_of(pctx_t *c, yaml_node_pair_t *p) {
    return inv_scalar(yaml_document_get_node(c->doc, p->key));
}

/* The explicit fields of one card; the profile comes from `model:` or the name. */
static int parse_card(pctx_t *c, yaml_node_t *item, unsigned int i, inv_gpu_t *g, gpu_model_t *own, int *has_model) {
    char ctx[32];
    snprintf(ctx, sizeof ctx, "gpus[%u]", i);
    if (item->type != YAML_MAPPING_NODE)
        return fail(c->err, c->errlen, c->path, inv_line(item), "%s: expected a mapping (name: ..., memory_mib: ...)",
                    ctx);
    if (inv_check_keys(c->doc, item, ctx, c->path, c->err, c->errlen) != 0) return -1;
    const gpu_model_t *profile = NULL;
    for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top; p++) {
        const char *key = key_of(c, p);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        int line = inv_line(vn);
        int r = model_field_parse(own, ctx, key, vn, c->path, c->err, c->errlen);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (strcmp(key, "model") != 0 && strcmp(key, "uuid") != 0 && strcmp(key, "pci_bus_id") != 0 &&
            strcmp(key, "lost") != 0 && strcmp(key, "xid") != 0)
            return fail(c->err, c->errlen, c->path, inv_line(yaml_document_get_node(c->doc, p->key)),
                        "%s: unknown key '%s' (expected model, uuid, pci_bus_id, lost, xid or a profile field: %s)", ctx,
                        key, model_field_names());
        const char *value = inv_scalar(vn);
        if (!value) return fail(c->err, c->errlen, c->path, line, "%s.%s: expected a single value", ctx, key);
        if (strcmp(key, "model") == 0) {
            profile = gpu_model_by_id(value);
            if (!profile)
                return fail(c->err, c->errlen, c->path, line, "%s.model: unknown model '%s' (known: %s)", ctx, value,
                            gpu_models_ids());
        } else if (strcmp(key, "uuid") == 0) {
            if (strncmp(value, "GPU-", 4) != 0 || strlen(value) < 8 || strlen(value) >= sizeof g->uuid)
                return fail(c->err, c->errlen, c->path, line, "%s.uuid: expected 'GPU-...', got '%s'", ctx, value);
            strcpy(g->uuid, value);
        } else if (strcmp(key, "pci_bus_id") == 0) {
            if (normalise_bus_id(value, g->pci_bus_id, sizeof g->pci_bus_id) != 0)
                return fail(c->err, c->errlen, c->path, line,
                            "%s.pci_bus_id: expected 'DDDDDDDD:BB:DD.F' (hex), got '%s'", ctx, value);
        } else if (strcmp(key, "lost") == 0) {
            if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
                return fail(c->err, c->errlen, c->path, line, "%s.lost: expected true or false, got '%s'", ctx, value);
            g->lost = strcmp(value, "true") == 0;
        } else if (strcmp(key, "xid") == 0) {
            size_t digits = strspn(value, "0123456789");
            if (digits < 1 || digits > 3 || value[digits] != '\0')
                return fail(c->err, c->errlen, c->path, line, "%s.xid: expected an Xid number 0-999, got '%s'", ctx,
                            value);
            g->xid = (unsigned int)atoi(value);
        }
    }
    *has_model = profile != NULL;
    if (!profile && !(own->memory_mib))
        return fail(c->err, c->errlen, c->path, inv_line(item), "%s: missing required key 'memory_mib'", ctx);
    if (!profile && !own->name[0])
        return fail(c->err, c->errlen, c->path, inv_line(item), "%s: missing required key 'name' (or 'model')", ctx);
    g->model = *(profile ? profile : gpu_model_for(own->name));
    return 0;
}

static int parse_gpus(pctx_t *c, inventory_t *inv, yaml_node_t *seq, gpu_model_t *own, int *has_model) {
    if (seq->type != YAML_SEQUENCE_NODE) {
        const char *v = inv_scalar(seq);
        return fail(c->err, c->errlen, c->path, inv_line(seq), "gpus: expected a list, got '%s'", v ? v : "a mapping");
    }
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(c->doc, *it);
        if (inv->gpu_count >= INV_MAX_GPUS)
            return fail(c->err, c->errlen, c->path, inv_line(item), "more than %d gpus", INV_MAX_GPUS);
        unsigned int i = inv->gpu_count++;
        if (parse_card(c, item, i, &inv->gpus[i], &own[i], &has_model[i]) != 0) return -1;
    }
    return 0;
}

/* Apply the card's own fields over its profile, then derive what is left. */
static void finish_card(inventory_t *inv, unsigned int i, const gpu_model_t *own, int has_model, unsigned int driver) {
    inv_gpu_t *g = &inv->gpus[i];
    if (has_model) g->model.memory_mib = memory_for_driver(&g->model, driver);
    else g->model.memory_mib = 0; /* a name-matched profile never sizes the card */
    model_overlay(&g->model, own);
    model_derive(&g->model);
    _Static_assert(sizeof g->name == sizeof g->model.name, "card and profile names have one size");
    memcpy(g->name, g->model.name, sizeof g->name);
    g->memory_mib = g->model.memory_mib;
    g->physical_index = i;
    if (!g->uuid[0]) derive_uuid(g, i, g->uuid, sizeof g->uuid);
    if (!g->pci_bus_id[0]) snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:00:%02X.0", 7 + i);
}

static int parse_body(pctx_t *c, inventory_t *inv, yaml_node_t *root, gpu_model_t *own);

static int parse_root(pctx_t *c, inventory_t *inv) {
    char *err = c->err;
    size_t errlen = c->errlen;
    const char *path = c->path;
    yaml_node_t *root = yaml_document_get_root_node(c->doc);
    if (!root) return fail(err, errlen, path, 0, "empty document (expected driver_version, cuda_version, gpus)");
    if (root->type != YAML_MAPPING_NODE)
        return fail(err, errlen, path, inv_line(root), "expected a mapping with driver_version, cuda_version, gpus");
    if (inv_check_keys(c->doc, root, "", path, err, errlen) != 0) return -1;
    gpu_model_t *own = calloc(INV_MAX_GPUS, sizeof *own); /* large: keep off the stack */
    if (!own) return fail(err, errlen, path, 0, "out of memory");
    int rc = parse_body(c, inv, root, own);
    free(own);
    return rc;
}

static int parse_body(pctx_t *c, inventory_t *inv, yaml_node_t *root, gpu_model_t *own) {
    char *err = c->err;
    size_t errlen = c->errlen;
    const char *path = c->path;
    int has_model[INV_MAX_GPUS] = {0};
    int have_gpus = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *key = key_of(c, p);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *value = inv_scalar(vn);
        int line = inv_line(vn);
        if (strcmp(key, "driver_version") == 0) {
            if (!value || strlen(value) >= sizeof inv->driver_version || !isdigit((unsigned char)value[0]) ||
                atoi(value) <= 0)
                return fail(err, errlen, path, line, "driver_version: expected a version like \"470.82.01\", got '%s'",
                            value ? value : "a list or mapping");
            strcpy(inv->driver_version, value);
        } else if (strcmp(key, "cuda_version") == 0) {
            if (!value || strlen(value) >= sizeof inv->cuda_version || parse_cuda_version(value, &inv->cuda_version_int) != 0)
                return fail(err, errlen, path, line, "cuda_version: expected a version like \"11.4\", got '%s'",
                            value ? value : "a list or mapping");
            strcpy(inv->cuda_version, value);
        } else if (strcmp(key, "gpus") == 0) {
            have_gpus = 1;
            if (parse_gpus(c, inv, vn, own, has_model) != 0) return -1;
        } else {
            return fail(err, errlen, path, inv_line(yaml_document_get_node(c->doc, p->key)),
                        "unknown key '%s' (expected driver_version, cuda_version, gpus)", key);
        }
    }
    if (!inv->driver_version[0]) return fail(err, errlen, path, 0, "missing required key 'driver_version'");
    unsigned int driver = (unsigned int)atoi(inv->driver_version);
    if (!inv->cuda_version[0]) {
        const char *cuda = gpu_models_cuda_for_driver(driver);
        if (!cuda)
            return fail(err, errlen, path, 0, "missing required key 'cuda_version' (no default for driver %u)", driver);
        snprintf(inv->cuda_version, sizeof inv->cuda_version, "%s", cuda);
        parse_cuda_version(cuda, &inv->cuda_version_int);
    }
    if (!have_gpus) return fail(err, errlen, path, 0, "missing required key 'gpus'");
    for (unsigned int i = 0; i < inv->gpu_count; i++) finish_card(inv, i, &own[i], has_model[i], driver);
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

int inventory_parse_text(const char *text, const char *path, inventory_t *inv, char *err, size_t errlen) {
    memset(inv, 0, sizeof *inv);
    if (gpu_models_load(err, errlen) != 0) return -1;
    yaml_document_t doc;
    if (inv_yaml_load(text, path, &doc, err, errlen) != 0) return -1;
    pctx_t c = {&doc, path, err, errlen};
    int rc = parse_root(&c, inv);
    yaml_document_delete(&doc);
    return rc;
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
