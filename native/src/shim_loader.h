/* The loader's entry points as the shim holds them (shim_loader.c). */
#ifndef GPUSHARE_SHIM_LOADER_H
#define GPUSHARE_SHIM_LOADER_H

#include "shim_config.h"

/* A function of the C library (libc.so.6, or libdl.so.2 before glibc 2.34) by name,
 * read from its dynamic symbol table: no lookup a hook or a workload could answer. */
HIDDEN void *shim_libc_function(const char *name);
/* Resolve the C library's dlvsym, dlopen and dlmopen (once). */
HIDDEN void shim_loader_resolve(void);
/* The shim's own dlsym/dlvsym/dlopen/dlmopen for a lookup of one of those names (and
 * the __libc_ aliases); NULL otherwise, and always in the hami-like build. */
HIDDEN void *shim_loader_symbol(const char *name);
/* shim.c's dlsym hook: the shim's function for `name`, or NULL for the C library's. */
HIDDEN void *gpushare_dlsym_hook(void *handle, const char *name);

#endif
