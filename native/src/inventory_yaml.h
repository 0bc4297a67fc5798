/* YAML plumbing shared by the inventory and the model profiles: loading a document
 * with libyaml, messages that name file and line, and the profile field table
 * (one parser for gpu-models.yaml entries and for inventory cards). */
#ifndef GPUSHARE_INVENTORY_YAML_H
#define GPUSHARE_INVENTORY_YAML_H

#include <stddef.h>
#include <yaml.h>

#include "gpu_models.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* Write "PATH:LINE: message" (or "PATH: message" when line is 0) to err; returns -1. */
HIDDEN int inv_fail(char *err, size_t errlen, const char *path, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The 1-based line of a node. */
HIDDEN int inv_line(const yaml_node_t *node);

/* Load the single document of text; an empty stream gives a document without root. */
HIDDEN int inv_yaml_load(const char *text, const char *path, yaml_document_t *doc, char *err, size_t errlen);

/* The text of a scalar node, or NULL when the node is not a scalar. */
HIDDEN const char *inv_scalar(const yaml_node_t *node);

/* -1 + "PATH:LINE: CTX: duplicate key 'K'" when a mapping repeats a key or has a
 * non-scalar key. */
HIDDEN int inv_check_keys(yaml_document_t *doc, yaml_node_t *map, const char *ctx, const char *path, char *err,
                          size_t errlen);

/* Set the profile field named key from value.  1: done, 0: key is not a profile
 * field, -1: bad value (err names CTX.KEY, the value and the line). */
HIDDEN int model_field_parse(gpu_model_t *m, const char *ctx, const char *key, yaml_node_t *value,
                             const char *path, char *err, size_t errlen);

/* Copy the fields src sets onto dst (and mark them set). */
HIDDEN void model_overlay(gpu_model_t *dst, const gpu_model_t *src);

/* Fill the derived fields (clock_khz, power_limit_mw). */
HIDDEN void model_derive(gpu_model_t *m);

/* Comma list of the profile field names (for "unknown key" messages). */
HIDDEN const char *model_field_names(void);

#endif
