/*
 * gpushare-mock-runtime, the entry point: what containerd's runc shim runs (BinaryName)
 * for every runc command of every container on a mock GPU node.
 *
 * Only create, run and exec carry a container spec the toolkit may edit; every other
 * command (start, state, kill, delete, features, ...) goes on to runc unchanged. This
 * program sends those straight to the runc that <driver>/runtime.conf names, as the
 * NVIDIA container runtime does, and hands the rest to the toolkit program that edits
 * the spec (<driver>/libexec/gpushare-mock-runtime, native/toolkit/gpushare-mock-runtime).
 * Why: an interpreter's start costs about four times runc's own run, and containerd
 * calls runc several times per container.
 *
 * Whatever this program is not certain of goes to the toolkit program too, which then
 * answers exactly as it always has: no command, a runtime.conf it cannot read or that
 * holds anything but well-formed known keys, a runc it cannot run. <driver> is the
 * directory above this file's bin/. Signal dispositions are left as this program was
 * started with them, so runc and the container inherit what they would without it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* runc's global options that take a value (runc --help); the toolkit program lists the same. */
static const char *const VALUE_OPTIONS[] = {"log", "log-format", "root", "criu", "rootless", NULL};
/* The commands whose spec the toolkit edits. */
static const char *const EDITED[] = {"create", "run", "exec", NULL};
static const char *const SWITCHES[] = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged",
    "accept-nvidia-visible-devices-as-volume-mounts",
    NULL,
};

static int listed(const char *word, size_t len, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == len && strncmp(*list, word, len) == 0)
            return 1;
    return 0;
}

/* The runc command in argv (the first argument not an option), or NULL; a value
 * option's separate value is skipped, as runc reads it. */
static const char *runc_command(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || strcmp(arg, "-") == 0)
            return arg;
        if (strcmp(arg, "--") == 0)
            return NULL;
        while (*arg == '-')
            arg++;
        const char *eq = strchr(arg, '=');
        if (!eq && listed(arg, strlen(arg), VALUE_OPTIONS))
            i++;
    }
    return NULL;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* runc's path from runtime.conf into ``runc`` when every line is one the toolkit
 * program accepts; 0 otherwise (it then reads the file itself and names the fault). */
static int read_runc(const char *driver, char *runc, size_t size) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/runtime.conf", driver) >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[PATH_MAX + 128];
    int ok = 1, have_runc = 0, have_inventory = 0;
    while (ok && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n') && !feof(f)) {
            ok = 0; /* longer than any line this program would act on */
            break;
        }
        char *text = trim(line);
        if (!*text || *text == '#')
            continue;
        char *eq = strchr(text, '=');
        if (!eq) {
            ok = 0;
            break;
        }
        *eq = '\0';
        char *key = trim(text), *value = trim(eq + 1);
        if (strcmp(key, "runc") == 0) {
            ok = value[0] == '/' && strlen(value) < size;
            if (ok) {
                strcpy(runc, value);
                have_runc = 1;
            }
        } else if (strcmp(key, "inventory") == 0) {
            ok = value[0] == '/';
            have_inventory = ok;
        } else if (strcmp(key, "dra-edits") == 0) {
            ok = value[0] == '/';
        } else if (listed(key, strlen(key), SWITCHES)) {
            ok = strcasecmp(value, "true") == 0 || strcasecmp(value, "false") == 0;
        } else {
            ok = 0;
        }
    }
    if (ferror(f))
        ok = 0;
    fclose(f);
    return ok && have_runc && have_inventory;
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "gpushare-mock-runtime: cannot read /proc/self/exe: %s\n", strerror(errno));
        return 1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/'); /* <driver>/bin/<this> */
    if (slash)
        *slash = '\0';
    slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    const char *driver = self[0] ? self : "/";

    const char *command = runc_command(argc, argv);
    if (command && !listed(command, strlen(command), EDITED)) {
        char runc[PATH_MAX];
        if (read_runc(driver, runc, sizeof runc)) {
            argv[0] = runc;
            execv(runc, argv);
            /* cannot run it: the toolkit program says so in its words, to runc's log */
        }
    }
    char toolkit[PATH_MAX];
    if (snprintf(toolkit, sizeof toolkit, "%s/libexec/gpushare-mock-runtime", driver) >= (int)sizeof toolkit) {
        fprintf(stderr, "gpushare-mock-runtime: the path of %s is too long\n", driver);
        return 1;
    }
    argv[0] = toolkit;
    execv(toolkit, argv);
    fprintf(stderr, "gpushare-mock-runtime: cannot run %s: %s\n", toolkit, strerror(errno));
    return 1;
}
