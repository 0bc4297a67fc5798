/* The GPU model profiles: native/models/gpu-models.yaml, built into the library by
 * .incbin (GPU_MODELS_YAML is its absolute path, from the Makefile), so a container
 * needs only the .so and its inventory. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_models.h"
#include "inventory.h"
#include "inventory_yaml.h"

#ifndef GPU_MODELS_YAML
#error "GPU_MODELS_YAML must name native/models/gpu-models.yaml"
#endif

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".hidden gpushare_models_yaml\n"
        ".type gpushare_models_yaml, @object\n"
        "gpushare_models_yaml:\n"
        ".incbin \"" GPU_MODELS_YAML "\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char gpushare_models_yaml[] __attribute__((visibility("hidden")));

#define SOURCE "gpu-models.yaml (built in)"
#define MAX_MODELS 64
#define MAX_CUDA 48

static gpu_model_t g_defaults;
static gpu_model_t g_models[MAX_MODELS];
static unsigned int g_model_count;
static struct { unsigned int driver; char cuda[16]; } g_cuda[MAX_CUDA];
static unsigned int g_cuda_count;
static char g_ids[MAX_MODELS * (GPU_MODEL_ID_LEN + 2)];
static char g_err[INV_ERROR_LEN];
static int g_rc = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int parse_match(yaml_document_t *doc, gpu_model_t *m, const char *ctx, yaml_node_t *v, char *err, size_t n) {
    if (v->type != YAML_SEQUENCE_NODE) return inv_fail(err, n, SOURCE, inv_line(v), "%s.match: expected a list", ctx);
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(doc, *it);
        const char *s = inv_scalar(item);
        if (!s || !*s || strlen(s) >= GPU_MODEL_NAME_LEN || m->match_count >= GPU_MODEL_MAX_MATCH)
            return inv_fail(err, n, SOURCE, inv_line(item), "%s.match: expected up to %d words", ctx,
                            GPU_MODEL_MAX_MATCH);
        strcpy(m->match[m->match_count++], s);
    }
    return 0;
}

static int parse_before(yaml_document_t *doc, gpu_model_t *m, const char *ctx, yaml_node_t *v, char *err, size_t n) {
    if (v->type != YAML_MAPPING_NODE)
        return inv_fail(err, n, SOURCE, inv_line(v), "%s.memory_mib_before: expected a mapping", ctx);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const char *k = inv_scalar(yaml_document_get_node(doc, p->key));
        const char *val = inv_scalar(yaml_document_get_node(doc, p->value));
        char *e1, *e2;
        unsigned long d = k ? strtoul(k, &e1, 10) : 0;
        unsigned long long mib = val ? strtoull(val, &e2, 10) : 0;
        if (!k || !val || *e1 || *e2 || !d || !mib || m->before_count >= GPU_MODEL_MAX_BEFORE)
            return inv_fail(err, n, SOURCE, inv_line(v), "%s.memory_mib_before: expected {DRIVER_MAJOR: MIB}", ctx);
        m->before[m->before_count].driver_major = (unsigned int)d;
        m->before[m->before_count++].memory_mib = mib;
    }
    return 0;
}

/* One profile mapping (defaults or a model). */
static int parse_profile(yaml_document_t *doc, yaml_node_t *map, gpu_model_t *m, const char *ctx, int is_default,
                         char *err, size_t n) {
    if (map->type != YAML_MAPPING_NODE) return inv_fail(err, n, SOURCE, inv_line(map), "%s: expected a mapping", ctx);
    if (inv_check_keys(doc, map, ctx, SOURCE, err, n) != 0) return -1;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *key = inv_scalar(yaml_document_get_node(doc, p->key));
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        int r = model_field_parse(m, ctx, key, v, SOURCE, err, n);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (!is_default && strcmp(key, "match") == 0) {
            if (parse_match(doc, m, ctx, v, err, n) != 0) return -1;
        } else if (!is_default && strcmp(key, "memory_mib_before") == 0) {
            if (parse_before(doc, m, ctx, v, err, n) != 0) return -1;
        } else {
            return inv_fail(err, n, SOURCE, inv_line(v), "%s: unknown key '%s'", ctx, key);
        }
    }
    return 0;
}

static int load(yaml_document_t *doc, char *err, size_t n) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || root->type != YAML_MAPPING_NODE) return inv_fail(err, n, SOURCE, 0, "expected a mapping");
    if (inv_check_keys(doc, root, "", SOURCE, err, n) != 0) return -1;
    yaml_node_t *models = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *key = inv_scalar(yaml_document_get_node(doc, p->key));
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (strcmp(key, "defaults") == 0) {
            if (parse_profile(doc, v, &g_defaults, "defaults", 1, err, n) != 0) return -1;
        } else if (strcmp(key, "models") == 0 && v->type == YAML_MAPPING_NODE) {
            models = v;
        } else if (strcmp(key, "cuda_for_driver") == 0 && v->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *c = v->data.mapping.pairs.start; c < v->data.mapping.pairs.top; c++) {
                const char *d = inv_scalar(yaml_document_get_node(doc, c->key));
                const char *cuda = inv_scalar(yaml_document_get_node(doc, c->value));
                if (!d || !cuda || atoi(d) <= 0 || strlen(cuda) >= sizeof g_cuda[0].cuda || g_cuda_count >= MAX_CUDA)
                    return inv_fail(err, n, SOURCE, inv_line(v), "cuda_for_driver: expected {DRIVER_MAJOR: \"X.Y\"}");
                g_cuda[g_cuda_count].driver = (unsigned int)atoi(d);
                strcpy(g_cuda[g_cuda_count++].cuda, cuda);
            }
        } else {
            return inv_fail(err, n, SOURCE, inv_line(v), "unexpected key '%s'", key);
        }
    }
    if (!models) return inv_fail(err, n, SOURCE, 0, "missing 'models'");
    if (inv_check_keys(doc, models, "models", SOURCE, err, n) != 0) return -1;
    for (yaml_node_pair_t *p = models->data.mapping.pairs.start; p < models->data.mapping.pairs.top; p++) {
        const char *id = inv_scalar(yaml_document_get_node(doc, p->key));
        if (g_model_count >= MAX_MODELS || strlen(id) >= GPU_MODEL_ID_LEN)
            return inv_fail(err, n, SOURCE, 0, "too many models or id too long: '%s'", id);
        char ctx[GPU_MODEL_ID_LEN + 8];
        snprintf(ctx, sizeof ctx, "models.%s", id);
        gpu_model_t own;
        memset(&own, 0, sizeof own);
        if (parse_profile(doc, yaml_document_get_node(doc, p->value), &own, ctx, 0, err, n) != 0) return -1;
        gpu_model_t *m = &g_models[g_model_count++];
        *m = g_defaults;
        model_overlay(m, &own);
        snprintf(m->id, sizeof m->id, "%s", id);
        memcpy(m->match, own.match, sizeof m->match);
        m->match_count = own.match_count;
        memcpy(m->before, own.before, sizeof m->before);
        m->before_count = own.before_count;
        model_derive(m);
        if (g_ids[0]) strcat(g_ids, ", ");
        strcat(g_ids, id);
    }
    model_derive(&g_defaults);
    return 0;
}

static void load_once(void) {
    yaml_document_t doc;
    if (inv_yaml_load(gpushare_models_yaml, SOURCE, &doc, g_err, sizeof g_err) != 0) return;
    g_rc = load(&doc, g_err, sizeof g_err);
    yaml_document_delete(&doc);
}

int gpu_models_load(char *err, unsigned long errlen) {
    pthread_once(&g_once, load_once);
    if (g_rc != 0) snprintf(err, errlen, "%s", g_err);
    return g_rc;
}

const gpu_model_t *gpu_model_by_id(const char *id) {
    for (unsigned int i = 0; i < g_model_count; i++)
        if (strcmp(g_models[i].id, id) == 0) return &g_models[i];
    return NULL;
}

const gpu_model_t *gpu_model_for(const char *name) {
    pthread_once(&g_once, load_once);
    if (g_rc != 0) return &g_defaults;
    for (unsigned int i = 0; i < g_model_count; i++)
        if (strcmp(g_models[i].name, name) == 0) return &g_models[i];
    for (unsigned int i = 0; i < g_model_count; i++)
        for (unsigned int j = 0; j < g_models[i].match_count; j++)
            if (strstr(name, g_models[i].match[j])) return &g_models[i];
    return &g_defaults;
}

const char *gpu_models_cuda_for_driver(unsigned int driver_major) {
    const char *best = NULL;
    unsigned int best_driver = 0;
    for (unsigned int i = 0; i < g_cuda_count; i++)
        if (g_cuda[i].driver <= driver_major && g_cuda[i].driver >= best_driver) {
            best = g_cuda[i].cuda;
            best_driver = g_cuda[i].driver;
        }
    return best;
}

const char *gpu_models_ids(void) { return g_ids; }
