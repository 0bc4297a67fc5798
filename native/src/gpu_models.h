/* Per-model constants the mocks report (compute capability, clock, SM count, PCI id),
 * looked up from the inventory's marketing name. */
#ifndef GPUSHARE_GPU_MODELS_H
#define GPUSHARE_GPU_MODELS_H

#include <string.h>

typedef struct {
    const char *needle;         /* substring of the name */
    int cc_major, cc_minor;
    int clock_khz;              /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */
    int sm_count;
    unsigned int pci_device_id; /* nvmlPciInfo_t.pciDeviceId */
    unsigned int power_limit_mw;
} gpu_model_t;

static const gpu_model_t GPU_MODELS[] = {
    {"H200", 9, 0, 1980000, 132, 0x233510DE, 700000},
    {"H100", 9, 0, 1980000, 132, 0x233010DE, 700000},
    {"B200", 10, 0, 1965000, 148, 0x290110DE, 1000000},
    {"A100", 8, 0, 1410000, 108, 0x20B010DE, 400000},
    {"A10G", 8, 6, 1710000, 80, 0x223710DE, 300000},
    {"A10", 8, 6, 1695000, 72, 0x223610DE, 150000},
    {"A30", 8, 0, 1440000, 56, 0x20B710DE, 165000},
    {"L40", 8, 9, 2490000, 142, 0x26B510DE, 300000},
    {"L4", 8, 9, 2040000, 58, 0x27B810DE, 72000},
    {"V100", 7, 0, 1530000, 80, 0x1DB110DE, 300000},
    {"T4", 7, 5, 1590000, 40, 0x1EB810DE, 70000},
    {"P100", 6, 0, 1480000, 56, 0x15F810DE, 250000},
    {"P40", 6, 1, 1531000, 30, 0x1B3810DE, 250000},
    {"P4", 6, 1, 1113500, 20, 0x1BB310DE, 75000},
    {"K80", 3, 7, 823500, 13, 0x102D10DE, 149000},
    {"RTX 40", 8, 9, 2520000, 128, 0x268410DE, 450000},
    {"RTX 30", 8, 6, 1695000, 82, 0x220410DE, 350000},
};

static const gpu_model_t GPU_MODEL_DEFAULT = {"", 7, 0, 1500000, 80, 0x000010DE, 250000};

static inline const gpu_model_t *gpu_model_for(const char *name) {
    for (size_t i = 0; i < sizeof GPU_MODELS / sizeof GPU_MODELS[0]; i++)
        if (strstr(name, GPU_MODELS[i].needle)) return &GPU_MODELS[i];
    return &GPU_MODEL_DEFAULT;
}

#endif
