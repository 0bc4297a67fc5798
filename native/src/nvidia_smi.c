/* nvidia-smi for GPU-less (mock) mode.  It reads everything through NVML, linked
 * dynamically, so inside a container it shows what the isolation shim allows.  The
 * default table follows the real tool's layout for the driver generation NVML
 * reports: <450 and 450-529 (79 columns), 530-549 (89), 550-579 (91), 580+ (91 with
 * a "+---+" rule under the header), 610+ (KMD/UMD header).  The Processes table lists
 * the compute processes NVML reports (the mock CUDA's node-wide process table).  A card
 * NVML calls lost is reported on stderr and left out, the other cards shown (exit 15). */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum layout { L440, L470, L535, L550, L580, L610 };

typedef struct {
    enum layout id;
    int width;           /* characters per line */
    int left, mid, right; /* cell widths */
    int name_max, name_keep;
} layout_t;

static const layout_t LAYOUTS[] = {
    {L440, 79, 31, 22, 22, 18, 15}, {L470, 79, 31, 22, 22, 18, 15}, {L535, 89, 41, 22, 22, 27, 24},
    {L550, 91, 41, 24, 22, 27, 24}, {L580, 91, 41, 24, 22, 27, 24}, {L610, 91, 41, 24, 22, 27, 24},
};

static const layout_t *layout_for(const char *driver) {
    int major = atoi(driver);
    if (major >= 610) return &LAYOUTS[5];
    if (major >= 580) return &LAYOUTS[4];
    if (major >= 550) return &LAYOUTS[3];
    if (major >= 530) return &LAYOUTS[2];
    if (major >= 450) return &LAYOUTS[1];
    return &LAYOUTS[0];
}

/* Exit codes of the real tool (15: a GPU has fallen off the bus or is otherwise inaccessible). */
enum {
    RC_OK = 0, RC_INVALID_ARG = 2, RC_NOT_SUPPORTED = 3, RC_QUERY_FAILED = 6, RC_DRIVER = 9, RC_GPU_LOST = 15,
    RC_OTHER = 255
};

static int fail_nvml(const char *what, nvmlReturn_t rc) {
    fprintf(stderr, "%s: %s\n", what, nvmlErrorString(rc));
    return rc == NVML_ERROR_NOT_SUPPORTED ? RC_NOT_SUPPORTED : RC_OTHER;
}

/* A horizontal rule: first and last character, fill, and '+' at the cell borders. */
static void rule(const layout_t *L, char first, char fill, int split, char last) {
    putchar(first);
    for (int i = 0; i < L->width - 2; i++)
        putchar(split && (i == L->left || i == L->left + 1 + L->mid) ? '+' : fill);
    putchar(last);
    putchar('\n');
}

static void full_line(const layout_t *L, const char *text) {
    printf("|%-*s|\n", L->width - 2, text);
}

static void blank_line(const layout_t *L) { printf("%*s\n", L->width, ""); }

static void name_cell(const layout_t *L, const char *name, char *out, size_t outlen) {
    if ((int)strlen(name) > L->name_max)
        snprintf(out, outlen, "%.*s...", L->name_keep, name);
    else
        snprintf(out, outlen, "%s", name);
}

typedef struct {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlPciInfo_t pci;
    nvmlMemory_t mem;
    char persistence[8], disp[8], fan[16], temp[16], perf[16], pwr[16], cap[16], ecc[24], util[16], compute[16], mig[16];
} gpu_view_t;

static nvmlReturn_t collect(unsigned int i, gpu_view_t *g) {
    nvmlDevice_t d;
    nvmlReturn_t rc = nvmlDeviceGetHandleByIndex_v2(i, &d);
    if (rc != NVML_SUCCESS) return rc;
    memset(g, 0, sizeof *g);
    if ((rc = nvmlDeviceGetName(d, g->name, sizeof g->name)) != NVML_SUCCESS) return rc;
    if ((rc = nvmlDeviceGetUUID(d, g->uuid, sizeof g->uuid)) != NVML_SUCCESS) return rc;
    if ((rc = nvmlDeviceGetPciInfo_v3(d, &g->pci)) != NVML_SUCCESS) return rc;
    if ((rc = nvmlDeviceGetMemoryInfo(d, &g->mem)) != NVML_SUCCESS) return rc;
    nvmlEnableState_t st, pending;
    unsigned int v, v2;
    unsigned long long ecc;
    nvmlPstates_t ps;
    nvmlUtilization_t u;
    nvmlComputeMode_t cm;
    snprintf(g->persistence, sizeof g->persistence, "%s",
             nvmlDeviceGetPersistenceMode(d, &st) != NVML_SUCCESS ? "N/A" : st ? "On" : "Off");
    snprintf(g->disp, sizeof g->disp, "%s", nvmlDeviceGetDisplayActive(d, &st) != NVML_SUCCESS ? "N/A" : st ? "On" : "Off");
    if (nvmlDeviceGetFanSpeed(d, &v) == NVML_SUCCESS) snprintf(g->fan, sizeof g->fan, "%u%%", v);
    else snprintf(g->fan, sizeof g->fan, "N/A");
    if (nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) snprintf(g->temp, sizeof g->temp, "%uC", v);
    else snprintf(g->temp, sizeof g->temp, "N/A");
    if (nvmlDeviceGetPerformanceState(d, &ps) == NVML_SUCCESS && ps != NVML_PSTATE_UNKNOWN) snprintf(g->perf, sizeof g->perf, "P%d", (int)ps);
    else snprintf(g->perf, sizeof g->perf, "N/A");
    if (nvmlDeviceGetPowerUsage(d, &v) == NVML_SUCCESS) snprintf(g->pwr, sizeof g->pwr, "%uW", v / 1000);
    else snprintf(g->pwr, sizeof g->pwr, "N/A");
    if (nvmlDeviceGetEnforcedPowerLimit(d, &v) == NVML_SUCCESS) snprintf(g->cap, sizeof g->cap, "%uW", v / 1000);
    else snprintf(g->cap, sizeof g->cap, "N/A");
    if (nvmlDeviceGetEccMode(d, &st, &pending) != NVML_SUCCESS) snprintf(g->ecc, sizeof g->ecc, "N/A");
    else if (!st) snprintf(g->ecc, sizeof g->ecc, "Off");
    else if (nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS)
        snprintf(g->ecc, sizeof g->ecc, "%llu", ecc);
    else snprintf(g->ecc, sizeof g->ecc, "N/A");
    if (nvmlDeviceGetUtilizationRates(d, &u) == NVML_SUCCESS) snprintf(g->util, sizeof g->util, "%u%%", u.gpu);
    else snprintf(g->util, sizeof g->util, "N/A");
    if (nvmlDeviceGetComputeMode(d, &cm) != NVML_SUCCESS) snprintf(g->compute, sizeof g->compute, "N/A");
    else snprintf(g->compute, sizeof g->compute, "%s",
                  cm == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS ? "E. Process" : cm == NVML_COMPUTEMODE_PROHIBITED ? "Prohibited" : "Default");
    if (nvmlDeviceGetMigMode(d, &v, &v2) == NVML_SUCCESS) snprintf(g->mig, sizeof g->mig, "%s", v ? "Enabled" : "Disabled");
    else snprintf(g->mig, sizeof g->mig, "N/A");
    return NVML_SUCCESS;
}

/* Say on stderr, in the real tool's words, which cards NVML calls lost; how many.  The
 * mock NVML still writes a lost card's handle, which answers its PCI info (the bus id). */
static unsigned int report_lost(unsigned int count) {
    unsigned int lost = 0;
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t d = NULL;
        nvmlPciInfo_t pci = {0};
        if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_ERROR_GPU_IS_LOST) continue;
        if (!d || nvmlDeviceGetPciInfo_v3(d, &pci) != NVML_SUCCESS) snprintf(pci.busId, sizeof pci.busId, "N/A");
        fprintf(stderr, "Unable to determine the device handle for GPU%s: %s.  Reboot the system to recover this GPU\n",
                pci.busId, nvmlErrorString(NVML_ERROR_GPU_IS_LOST));
        lost++;
    }
    return lost;
}

static void timestamp_line(void) {
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
    printf("%s       \n", buf);
}

/* One row per compute process of each card, as NVML lists them; the number printed. */
static int print_processes(const layout_t *L, unsigned int count) {
    int printed = 0;
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t d;
        nvmlProcessInfo_t procs[64];
        unsigned int n = 64;
        if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS) continue;
        if (nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs) != NVML_SUCCESS) continue;
        for (unsigned int j = 0; j < n; j++) {
            char name[256] = "N/A", shown[256], line[512], head[64];
            nvmlSystemGetProcessName(procs[j].pid, name, sizeof name);
            if (L->id == L440)
                snprintf(head, sizeof head, "%5u %9u %6s   ", i, procs[j].pid, "C");
            else
                snprintf(head, sizeof head, "%5u   %3s  %3s %*u %6s   ", i, "N/A", "N/A", L->id >= L550 ? 15 : 9,
                         procs[j].pid, "C");
            /* name, a blank, the usage right-aligned (7 digits + MiB) and a blank before the border */
            int name_w = L->width - 2 - (int)strlen(head) - 12;
            if (name_w < 8) name_w = 8;
            if ((int)strlen(name) > name_w)
                snprintf(shown, sizeof shown, "...%s", name + strlen(name) - (size_t)(name_w - 3));
            else
                snprintf(shown, sizeof shown, "%s", name);
            snprintf(line, sizeof line, "%s%-*s %7lluMiB ", head, name_w, shown, procs[j].usedGpuMemory >> 20);
            full_line(L, line);
            printed++;
        }
    }
    return printed;
}

static int print_table(void) {
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda = 0;
    unsigned int count = 0;
    nvmlReturn_t rc;
    if ((rc = nvmlSystemGetDriverVersion(driver, sizeof driver)) != NVML_SUCCESS) return fail_nvml("Failed to get driver version", rc);
    if ((rc = nvmlDeviceGetCount_v2(&count)) != NVML_SUCCESS) return fail_nvml("Failed to get device count", rc);
    if (count == 0) {
        printf("No devices were found\n");
        return RC_QUERY_FAILED;
    }
    unsigned int lost = report_lost(count);
    if (lost == count) return RC_GPU_LOST;
    char cuda_s[16] = "N/A";
    if (nvmlSystemGetCudaDriverVersion_v2(&cuda) == NVML_SUCCESS && cuda > 0)
        snprintf(cuda_s, sizeof cuda_s, "%d.%d", cuda / 1000, (cuda % 1000) / 10);
    const layout_t *L = layout_for(driver);
    int wide = L->id >= L535, mig_row = L->id >= L470;
    char line[256];

    timestamp_line();
    rule(L, '+', '-', 0, '+');
    if (L->id == L610) snprintf(line, sizeof line, " NVIDIA-SMI %-23sKMD Version: %-14sCUDA UMD Version: %-9s", driver, driver, cuda_s);
    else if (L->id >= L550) snprintf(line, sizeof line, " NVIDIA-SMI %-23sDriver Version: %-15sCUDA Version: %-9s", driver, driver, cuda_s);
    else if (L->id == L535) snprintf(line, sizeof line, " NVIDIA-SMI %-23sDriver Version: %-13sCUDA Version: %-9s", driver, driver, cuda_s);
    else snprintf(line, sizeof line, " NVIDIA-SMI %-13sDriver Version: %-13sCUDA Version: %-9s", driver, driver, cuda_s);
    full_line(L, line);
    rule(L, L->id >= L580 ? '+' : '|', '-', 1, '+');
    if (!wide) {
        printf("| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n");
        printf("| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n");
    } else if (L->mid == 22) {
        printf("| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |\n");
        printf("| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |\n");
    } else {
        printf("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n");
        printf("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n");
    }
    if (mig_row) printf("|%*s|%*s|%*s |\n", L->left, "", L->mid, "", L->right - 1, "MIG M.");
    rule(L, '|', '=', 1, '|');

    for (unsigned int i = 0; i < count; i++) {
        gpu_view_t g;
        if ((rc = collect(i, &g)) == NVML_ERROR_GPU_IS_LOST) continue;
        if (rc != NVML_SUCCESS) return fail_nvml("Failed to query GPU", rc);
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 4], used[32], total[32];
        name_cell(L, g.name, name, sizeof name);
        snprintf(used, sizeof used, "%llu", g.mem.used >> 20);
        snprintf(total, sizeof total, "%llu", g.mem.total >> 20);
        int pad = L->mid == 24 ? 3 : 1;
        if (!wide) printf("|%4u  %-18s  %-3s  |", i, name, g.persistence);
        else printf("|%4u  %-30s %-3s |", i, name, g.persistence);
        printf("%*s%-16s %3s |%21s |\n", pad, "", g.pci.busId, g.disp, g.ecc);
        if (!wide) printf("| %3s  %4s  %4s  %5s / %4s |", g.fan, g.temp, g.perf, g.pwr, g.cap);
        else if (L->id == L535) printf("| %3s  %4s  %4s %16s / %4s |", g.fan, g.temp, g.perf, g.pwr, g.cap);
        else printf("| %3s  %4s  %4s %15s / %5s |", g.fan, g.temp, g.perf, g.pwr, g.cap);
        if (L->mid == 24) printf("%8sMiB / %6sMiB |", used, total);
        else printf("%7sMiB / %5sMiB |", used, total);
        printf("%8s%13s |\n", g.util, g.compute);
        if (mig_row) printf("|%*s|%*s|%*s |\n", L->left, "", L->mid, "", L->right - 1, g.mig);
        rule(L, '+', '-', 1, '+');
    }

    blank_line(L);
    rule(L, '+', '-', 0, '+');
    if (L->id == L440) {
        snprintf(line, sizeof line, " Processes:%*s", L->width - 2 - 11 - 11, "GPU Memory ");
        full_line(L, line);
        full_line(L, "  GPU       PID   Type   Process name                             Usage      ");
    } else {
        full_line(L, " Processes:");
        const char *head = L->id >= L550 ? "  GPU   GI   CI              PID   Type   Process name"
                                         : "  GPU   GI   CI        PID   Type   Process name";
        snprintf(line, sizeof line, "%-*sGPU Memory ", L->width - 2 - 11, head);
        full_line(L, line);
        snprintf(line, sizeof line, "%-*sUsage      ", L->width - 2 - 11, "        ID   ID");
        full_line(L, line);
    }
    rule(L, '|', '=', 0, '|');
    if (print_processes(L, count) == 0) full_line(L, "  No running processes found");
    rule(L, '+', '-', 0, '+');
    return lost ? RC_GPU_LOST : RC_OK;
}

static int list_gpus(void) {
    unsigned int count = 0;
    nvmlReturn_t rc = nvmlDeviceGetCount_v2(&count);
    if (rc != NVML_SUCCESS) return fail_nvml("Failed to get device count", rc);
    if (count == 0) {
        printf("No devices were found\n");
        return RC_QUERY_FAILED;
    }
    unsigned int lost = report_lost(count);
    for (unsigned int i = 0; i < count; i++) {
        gpu_view_t g;
        if ((rc = collect(i, &g)) == NVML_ERROR_GPU_IS_LOST) continue;
        if (rc != NVML_SUCCESS) return fail_nvml("Failed to query GPU", rc);
        printf("GPU %u: %s (UUID: %s)\n", i, g.name, g.uuid);
    }
    return lost ? RC_GPU_LOST : RC_OK;
}

/* ---- --query-gpu ---------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *alias;
    const char *unit; /* shown as " [unit]" in the header and " unit" after values */
} field_t;

static const field_t FIELDS[] = {
    {"index", NULL, NULL},
    {"name", "gpu_name", NULL},
    {"uuid", "gpu_uuid", NULL},
    {"memory.total", NULL, "MiB"},
    {"memory.used", NULL, "MiB"},
    {"memory.free", NULL, "MiB"},
    {"pci.bus_id", "gpu_bus_id", NULL},
    {"driver_version", NULL, NULL},
    {"count", NULL, NULL},
    {"serial", "gpu_serial", NULL},
    {"persistence_mode", NULL, NULL},
    {"temperature.gpu", NULL, NULL},
    {"utilization.gpu", NULL, "%"},
    {"compute_mode", NULL, NULL},
};

static const field_t *find_field(const char *name) {
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++)
        if (strcmp(FIELDS[i].name, name) == 0 || (FIELDS[i].alias && strcmp(FIELDS[i].alias, name) == 0))
            return &FIELDS[i];
    return NULL;
}

static int query_gpu(const char *fields_arg, const char *format_arg) {
    int header = 1, units = 1;
    char fmt[256];
    snprintf(fmt, sizeof fmt, "%s", format_arg);
    char *save = NULL;
    int csv = 0;
    for (char *tok = strtok_r(fmt, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (strcmp(tok, "csv") == 0) csv = 1;
        else if (strcmp(tok, "noheader") == 0) header = 0;
        else if (strcmp(tok, "nounits") == 0) units = 0;
        else {
            fprintf(stderr, "\"%s\" is not a valid format option.\n", tok);
            return RC_INVALID_ARG;
        }
    }
    if (!csv) {
        fprintf(stderr, "Format option \"csv\" is required with --format.\n");
        return RC_INVALID_ARG;
    }
    const field_t *list[64];
    int n = 0;
    char fbuf[1024];
    snprintf(fbuf, sizeof fbuf, "%s", fields_arg);
    save = NULL;
    for (char *tok = strtok_r(fbuf, ",", &save); tok && n < 64; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        const field_t *f = find_field(tok);
        if (!f) {
            printf("Field \"%s\" is not a valid field to query.\n\n", tok);
            return RC_INVALID_ARG;
        }
        list[n++] = f;
    }
    if (n == 0) {
        printf("No fields were given to --query-gpu.\n");
        return RC_INVALID_ARG;
    }
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    unsigned int count = 0;
    nvmlReturn_t rc;
    if ((rc = nvmlSystemGetDriverVersion(driver, sizeof driver)) != NVML_SUCCESS) return fail_nvml("Failed to get driver version", rc);
    if ((rc = nvmlDeviceGetCount_v2(&count)) != NVML_SUCCESS) return fail_nvml("Failed to get device count", rc);
    unsigned int lost = report_lost(count);
    if (header) {
        for (int j = 0; j < n; j++) {
            printf("%s%s", j ? ", " : "", list[j]->name);
            if (list[j]->unit && units) printf(" [%s]", list[j]->unit);
        }
        printf("\n");
    }
    for (unsigned int i = 0; i < count; i++) {
        gpu_view_t g;
        if ((rc = collect(i, &g)) == NVML_ERROR_GPU_IS_LOST) continue;
        if (rc != NVML_SUCCESS) return fail_nvml("Failed to query GPU", rc);
        nvmlDevice_t d;
        nvmlDeviceGetHandleByIndex_v2(i, &d);
        for (int j = 0; j < n; j++) {
            const char *f = list[j]->name;
            char v[128];
            if (!strcmp(f, "index")) snprintf(v, sizeof v, "%u", i);
            else if (!strcmp(f, "name")) snprintf(v, sizeof v, "%s", g.name);
            else if (!strcmp(f, "uuid")) snprintf(v, sizeof v, "%s", g.uuid);
            else if (!strcmp(f, "memory.total")) snprintf(v, sizeof v, "%llu", g.mem.total >> 20);
            else if (!strcmp(f, "memory.used")) snprintf(v, sizeof v, "%llu", g.mem.used >> 20);
            else if (!strcmp(f, "memory.free")) snprintf(v, sizeof v, "%llu", g.mem.free >> 20);
            else if (!strcmp(f, "pci.bus_id")) snprintf(v, sizeof v, "%s", g.pci.busId);
            else if (!strcmp(f, "driver_version")) snprintf(v, sizeof v, "%s", driver);
            else if (!strcmp(f, "count")) snprintf(v, sizeof v, "%u", count);
            else if (!strcmp(f, "serial")) {
                if (nvmlDeviceGetSerial(d, v, sizeof v) != NVML_SUCCESS) snprintf(v, sizeof v, "[N/A]");
            } else if (!strcmp(f, "persistence_mode")) snprintf(v, sizeof v, "%s", !strcmp(g.persistence, "On") ? "Enabled" : !strcmp(g.persistence, "Off") ? "Disabled" : "[N/A]");
            else if (!strcmp(f, "temperature.gpu")) snprintf(v, sizeof v, "%.*s", (int)strcspn(g.temp, "C"), g.temp);
            else if (!strcmp(f, "utilization.gpu")) snprintf(v, sizeof v, "%.*s", (int)strcspn(g.util, "%"), g.util);
            else if (!strcmp(f, "compute_mode")) snprintf(v, sizeof v, "%s", !strcmp(g.compute, "E. Process") ? "Exclusive_Process" : g.compute);
            else snprintf(v, sizeof v, "[N/A]");
            printf("%s%s", j ? ", " : "", v);
            if (list[j]->unit && units && v[0] != '[') printf(" %s", list[j]->unit);
        }
        printf("\n");
    }
    return lost ? RC_GPU_LOST : RC_OK;
}

static void usage(const char *driver) {
    printf("NVIDIA System Management Interface -- v%s\n\n", driver);
    printf("NVSMI provides monitoring information for Tesla and select Quadro devices.\n");
    printf("The data is presented in either a plain text or an XML format, via stdout or a file.\n");
    printf("NVSMI also provides several management operations for changing the device state.\n\n");
    printf("Note that the functionality of NVSMI is exposed through the NVML C-based\n");
    printf("library. See the NVIDIA developer website for more information about NVML.\n");
    printf("Python wrappers to NVML are also available.  The output of NVSMI is\n");
    printf("not guaranteed to be backwards compatible; NVML and the bindings are backwards\n");
    printf("compatible.\n\n");
    printf("Usage: nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...\n\n");
    printf("    -h,   --help                Print usage information and exit.\n\n");
    printf("  LIST OPTIONS:\n\n");
    printf("    -L,   --list-gpus           Display a list of GPUs connected to the system.\n\n");
    printf("  SUMMARY OPTIONS:\n\n");
    printf("    <no arguments>              Show a summary of GPUs connected to the system.\n\n");
    printf("  SELECTIVE QUERY OPTIONS:\n\n");
    printf("    --query-gpu                 Information about GPU.\n");
    printf("                                Call --help-query-gpu for more info.\n");
    printf("    --format=                   Comma separated list of format options:\n");
    printf("                                  csv - comma separated values (MANDATORY)\n");
    printf("                                  noheader - skip the first line with column headers\n");
    printf("                                  nounits - don't print units for numerical\n");
    printf("                                             values\n\n");
    printf("This nvidia-smi is the GPU-less mock of gpushare-conformance; it reads the\n");
    printf("inventory named by GPUSHARE_MOCK_INVENTORY through the mock NVML library.\n");
}

static int invalid_combination(void) {
    printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
    return RC_INVALID_ARG;
}

int main(int argc, char **argv) {
    const char *query = NULL, *format = NULL;
    int list = 0, help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) help = 1;
        else if (!strcmp(a, "-L") || !strcmp(a, "--list-gpus")) list = 1;
        else if (!strncmp(a, "--query-gpu=", 12)) query = a + 12;
        else if (!strcmp(a, "--query-gpu") && i + 1 < argc) query = argv[++i];
        else if (!strncmp(a, "--format=", 9)) format = a + 9;
        else if (!strcmp(a, "--format") && i + 1 < argc) format = argv[++i];
        else return invalid_combination();
    }
    nvmlReturn_t rc = nvmlInit_v2();
    if (help) {
        char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "N/A";
        if (rc == NVML_SUCCESS) nvmlSystemGetDriverVersion(driver, sizeof driver);
        usage(driver);
        if (rc == NVML_SUCCESS) nvmlShutdown();
        return RC_OK;
    }
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED) {
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n\n");
        return RC_DRIVER;
    }
    if (rc != NVML_SUCCESS) {
        printf("Failed to initialize NVML: %s\n", nvmlErrorString(rc));
        return RC_OTHER;
    }
    int out;
    if ((query != NULL) != (format != NULL) || (list && query)) out = invalid_combination();
    else if (query) out = query_gpu(query, format);
    else if (list) out = list_gpus();
    else out = print_table();
    nvmlShutdown();
    return out;
}
