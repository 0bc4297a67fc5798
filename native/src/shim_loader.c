/* The dynamic loader's own entry points, held so that a workload cannot use them to
 * reach the real driver past the shim (docs/threat-model.md, "Loader tricks").
 *
 * The hooks of shim.c bind every direct call and every dlsym() lookup to the shim.
 * Four ordinary loader features would still hand a process the driver's own entry
 * points, and this file closes each:
 *
 *   RTLD_DEEPBIND   a library opened with it resolves its own references (its
 *                   libcuda.so.1 dependency) before the global scope where the shim
 *                   sits: dlopen() drops the flag while limits are in force.
 *   dlmopen()       a new link-map namespace loads a private libcuda.so.1 without the
 *                   preloaded shim: a driver opened that way is opened in the base
 *                   namespace instead (dlopen with the same flags).
 *   dlvsym()        fetching the C library's dlsym (or dlvsym, dlopen, dlmopen) by
 *                   version: the lookup of any of these names, by dlsym or dlvsym,
 *                   returns the shim's own.
 *   a preload of the workload's own that defines dlsym, loaded before the shim: it
 *                   must get the C library's dlsym from somewhere, and every way the
 *                   loader offers (dlsym, dlvsym, the __libc_ aliases) answers with
 *                   the shim's.
 *
 * What no interposition library can hold (a process that parses the driver's symbol
 * table itself, loads it with a private loader, or issues raw ioctls) is stated in
 * docs/threat-model.md and judged by the suite as beyond this layer.
 *
 * The shim finds the C library's own functions by reading its dynamic symbol table
 * (the r_debug link-map list, no function call), so that its own lookups never pass
 * through its hooks, nor through a workload's. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_config.h"
#include "shim_loader.h"

HIDDEN void *gpushare_real_dlvsym;
HIDDEN void *gpushare_real_dlopen;
HIDDEN void *gpushare_real_dlmopen;

#define EARLY_SAFE __attribute__((no_sanitize_address, noinline))

/* A pointer of the dynamic section: already relocated by the loader on most
 * architectures, an offset from the object's base where it left it read-only. */
EARLY_SAFE static uintptr_t dyn_ptr(const struct link_map *m, ElfW(Addr) p) {
    return p < (ElfW(Addr))m->l_addr ? (uintptr_t)m->l_addr + p : (uintptr_t)p;
}

/* How many symbols a GNU hash table covers: past the highest chain's end. */
EARLY_SAFE static size_t gnu_hash_symbols(const uint32_t *gh) {
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_words = gh[2];
    const uint32_t *buckets = gh + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++)
        if (buckets[i] > last) last = buckets[i];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1u)) last++;
    return (size_t)last + 1;
}

EARLY_SAFE static int name_is(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

/* The C library's definition of `name` in object m, or NULL. */
EARLY_SAFE static void *defined_in(const struct link_map *m, const char *name) {
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu_hash = NULL, *sysv_hash = NULL;
    const ElfW(Half) *versym = NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_GNU_HASH: gnu_hash = (const uint32_t *)dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_HASH: sysv_hash = (const uint32_t *)dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_VERSYM: versym = (const ElfW(Half) *)dyn_ptr(m, d->d_un.d_ptr); break;
        default: break;
        }
    }
    if (!symtab || !strtab || (!gnu_hash && !sysv_hash)) return NULL;
    size_t count = sysv_hash ? sysv_hash[1] : gnu_hash_symbols(gnu_hash);
    void *compat = NULL;
    for (size_t i = 0; i < count; i++) {
        const ElfW(Sym) *s = &symtab[i];
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC) continue;
        if (!name_is(strtab + s->st_name, name)) continue;
        void *at = (void *)((uintptr_t)m->l_addr + s->st_value);
        if (!versym || !(versym[i] & 0x8000)) return at; /* the default version */
        compat = at;
    }
    return compat;
}

/* The basename of a loaded object starts with prefix ("libc.so", "libdl.so"). */
EARLY_SAFE static int object_is(const struct link_map *m, const char *prefix) {
    const char *n = m->l_name, *base = n;
    if (!n) return 0;
    for (; *n; n++)
        if (*n == '/') base = n + 1;
    while (*prefix && *prefix == *base) prefix++, base++;
    return *prefix == '\0';
}

EARLY_SAFE void *shim_libc_function(const char *name) {
    static const char *const libraries[] = {"libc.so", "libdl.so"}; /* libdl: C libraries before 2.34 */
    for (size_t l = 0; l < sizeof libraries / sizeof libraries[0]; l++)
        for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
            if (!object_is(m, libraries[l])) continue;
            void *at = defined_in(m, name);
            if (at) return at;
        }
    return NULL;
}

EARLY_SAFE static void *must(const char *name) {
    void *p = shim_libc_function(name);
    if (!p) {
        static const char msg[] = "gpushare-shim: cannot find the C library's loader functions\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        abort();
    }
    return p;
}

EARLY_SAFE void shim_loader_resolve(void) {
    if (__atomic_load_n(&gpushare_real_dlmopen, __ATOMIC_ACQUIRE)) return;
    __atomic_store_n(&gpushare_real_dlvsym, must("dlvsym"), __ATOMIC_RELEASE);
    __atomic_store_n(&gpushare_real_dlopen, must("dlopen"), __ATOMIC_RELEASE);
    __atomic_store_n(&gpushare_real_dlmopen, must("dlmopen"), __ATOMIC_RELEASE);
}

/* ---- what the hooks decide ---------------------------------------------------------- */

#ifdef SHIM_HAMI_LIKE
/* The hami-like build holds dlsym() only, as HAMi-core does: the loader is the real one. */
static int loader_held(void) { return 0; }
#else
static int loader_held(void) {
    const shim_config_t *cfg = shim_config();
    return cfg->mode != SHIM_PASSTHROUGH && !(cfg->fault & SHIM_FAULT_LOADER_UNHELD); /* fault: the loader is left alone */
}
#endif

/* The flags dlopen() passes on. */
HIDDEN int gpushare_dlopen_flags(int flags) {
    shim_loader_resolve();
    return loader_held() ? flags & ~RTLD_DEEPBIND : flags;
}

/* dlmopen(): the flags of a dlopen() in the base namespace instead, or -1 to let the
 * C library's dlmopen() answer (the base namespace asked, or nothing held). */
HIDDEN int gpushare_dlmopen_flags(long lmid, int flags) {
    shim_loader_resolve();
    if (lmid == (long)LM_ID_BASE || !loader_held()) return -1;
    return flags & ~RTLD_DEEPBIND;
}

/* The shim's own loader function for a lookup of `name`, or NULL.  Whatever the mode:
 * this runs inside dlsym, where a sanitizer runtime that is not set up yet may be the
 * caller, so it reads no configuration; the functions handed out decide when called. */
EARLY_SAFE void *shim_loader_symbol(const char *name) {
#ifdef SHIM_HAMI_LIKE
    (void)name;
    return NULL;
#else
    if (name[0] == '_') {
        if (name_is(name, "__libc_dlopen_mode")) return (void *)&dlopen;
        if (name_is(name, "__libc_dlsym")) return (void *)&dlsym;
        if (name_is(name, "__libc_dlvsym")) return (void *)&dlvsym;
        return NULL;
    }
    if (name_is(name, "dlsym")) return (void *)&dlsym;
    if (name_is(name, "dlvsym")) return (void *)&dlvsym;
    if (name_is(name, "dlopen")) return (void *)&dlopen;
    if (name_is(name, "dlmopen")) return (void *)&dlmopen;
    return NULL;
#endif
}

/* dlvsym() looks up like dlsym() (shim.c), the version aside. */
EARLY_SAFE HIDDEN void *gpushare_dlvsym_hook(void *handle, const char *name, const char *version) {
    (void)version;
    shim_loader_resolve();
    return gpushare_dlsym_hook(handle, name);
}

/* ---- the entry points ----------------------------------------------------------------
 *
 * Each ends in a tail jump to the C library's, so that it sees the caller's return
 * address: RTLD_NEXT and a library's search path are relative to the calling object. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlvsym\n"
        ".type dlvsym, @function\n"
        "dlvsym:\n"
        "    .cfi_startproc\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rdx\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call gpushare_dlvsym_hook\n"
        "    popq %rdx\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    jmp *gpushare_real_dlvsym(%rip)\n"
        "1:  ret\n"
        "    .cfi_endproc\n"
        ".size dlvsym, .-dlvsym\n"

        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "    .cfi_startproc\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    movl %esi, %edi\n"
        "    call gpushare_dlopen_flags\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    movl %eax, %esi\n"
        "    jmp *gpushare_real_dlopen(%rip)\n"
        "    .cfi_endproc\n"
        ".size dlopen, .-dlopen\n"

        ".globl dlmopen\n"
        ".type dlmopen, @function\n"
        "dlmopen:\n"
        "    .cfi_startproc\n"
        "    pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rdx\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    movl %edx, %esi\n"
        "    call gpushare_dlmopen_flags\n"
        "    popq %rdx\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    cmpl $-1, %eax\n"
        "    je 1f\n"
        "    movq %rsi, %rdi\n"
        "    movl %eax, %esi\n"
        "    jmp *gpushare_real_dlopen(%rip)\n"
        "1:  jmp *gpushare_real_dlmopen(%rip)\n"
        "    .cfi_endproc\n"
        ".size dlmopen, .-dlmopen\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlvsym\n"
        ".type dlvsym, %function\n"
        "dlvsym:\n"
        "    stp x29, x30, [sp, #-48]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    str x2, [sp, #32]\n"
        "    bl gpushare_dlvsym_hook\n"
        "    mov x9, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldr x2, [sp, #32]\n"
        "    ldp x29, x30, [sp], #48\n"
        "    cbnz x9, 1f\n"
        "    adrp x10, gpushare_real_dlvsym\n"
        "    ldr x10, [x10, #:lo12:gpushare_real_dlvsym]\n"
        "    br x10\n"
        "1:  mov x0, x9\n"
        "    ret\n"
        ".size dlvsym, .-dlvsym\n"

        ".globl dlopen\n"
        ".type dlopen, %function\n"
        "dlopen:\n"
        "    stp x29, x30, [sp, #-32]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    mov w0, w1\n"
        "    bl gpushare_dlopen_flags\n"
        "    mov w9, w0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        "    mov w1, w9\n"
        "    adrp x10, gpushare_real_dlopen\n"
        "    ldr x10, [x10, #:lo12:gpushare_real_dlopen]\n"
        "    br x10\n"
        ".size dlopen, .-dlopen\n"

        ".globl dlmopen\n"
        ".type dlmopen, %function\n"
        "dlmopen:\n"
        "    stp x29, x30, [sp, #-48]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    str x2, [sp, #32]\n"
        "    mov w1, w2\n"
        "    bl gpushare_dlmopen_flags\n"
        "    mov w9, w0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldr x2, [sp, #32]\n"
        "    ldp x29, x30, [sp], #48\n"
        "    cmn w9, #1\n"
        "    b.eq 1f\n"
        "    mov x0, x1\n"
        "    mov w1, w9\n"
        "    adrp x10, gpushare_real_dlopen\n"
        "    ldr x10, [x10, #:lo12:gpushare_real_dlopen]\n"
        "    br x10\n"
        "1:  adrp x10, gpushare_real_dlmopen\n"
        "    ldr x10, [x10, #:lo12:gpushare_real_dlmopen]\n"
        "    br x10\n"
        ".size dlmopen, .-dlmopen\n");
#else
#error "loader trampolines: unsupported architecture"
#endif
