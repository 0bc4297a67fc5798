/* GPU model profiles (native/models/gpu-models.yaml, built into the library): the
 * hardware constants the mocks report for a card.  An inventory card carries its
 * resolved profile (inv_gpu_t.model); gpu_model_for() looks one up by marketing name. */
#ifndef GPUSHARE_GPU_MODELS_H
#define GPUSHARE_GPU_MODELS_H

#define GPU_MODEL_ID_LEN 48
#define GPU_MODEL_NAME_LEN 96
#define GPU_MODEL_WORD_LEN 16
#define GPU_MODEL_MAX_MATCH 4
#define GPU_MODEL_MAX_BEFORE 4

typedef struct {
    char id[GPU_MODEL_ID_LEN];        /* key under models:, "" for defaults */
    unsigned long long set;           /* bit i: field i of the field table was given */
    /* card identity (profiles give them; inventories may override) */
    char name[GPU_MODEL_NAME_LEN];
    unsigned long long memory_mib;
    /* hardware constants */
    char architecture[GPU_MODEL_WORD_LEN];
    char brand[GPU_MODEL_WORD_LEN];
    int cc_major, cc_minor;
    unsigned int sm_count;
    unsigned int pci_device_id, pci_subsystem_id;
    unsigned int clock_graphics_max_mhz, clock_sm_max_mhz, clock_memory_max_mhz, clock_video_max_mhz;
    unsigned int clock_graphics_default_mhz, clock_memory_default_mhz;
    unsigned int clock_graphics_idle_mhz, clock_memory_idle_mhz;
    unsigned int power_limit_w, power_min_limit_w, power_max_limit_w, power_idle_w;
    unsigned int bar1_mib, pcie_generation, pcie_width, memory_bus_width;
    unsigned int temp_idle_c, temp_slowdown_c, temp_shutdown_c, temp_max_operating_c;
    unsigned int fans, fan_speed_percent;
    int ecc, mig;
    /* profile-only: name substrings that select this profile, older drivers' totals */
    char match[GPU_MODEL_MAX_MATCH][GPU_MODEL_NAME_LEN];
    unsigned int match_count;
    struct { unsigned int driver_major; unsigned long long memory_mib; } before[GPU_MODEL_MAX_BEFORE];
    unsigned int before_count;
    /* derived, for the CUDA attribute names */
    int clock_khz;
    unsigned int power_limit_mw;
} gpu_model_t;

/* Load the built-in profiles once; -1 + err when the built-in data is bad. */
__attribute__((visibility("hidden")))
int gpu_models_load(char *err, unsigned long errlen);

/* The profile with this id, or NULL (after gpu_models_load). */
__attribute__((visibility("hidden")))
const gpu_model_t *gpu_model_by_id(const char *id);

/* The profile for a card name: exact name, else first `match` substring, else the
 * defaults.  Never NULL; the defaults when the built-in data cannot be loaded. */
__attribute__((visibility("hidden")))
const gpu_model_t *gpu_model_for(const char *name);

/* The CUDA version ("11.4") a driver major version reports, or NULL. */
__attribute__((visibility("hidden")))
const char *gpu_models_cuda_for_driver(unsigned int driver_major);

/* Comma list of the profile ids (for error messages). */
__attribute__((visibility("hidden")))
const char *gpu_models_ids(void);

#endif
