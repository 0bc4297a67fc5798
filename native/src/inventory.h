/* Mock GPU inventory: the YAML file named by GPUSHARE_MOCK_INVENTORY (any YAML style,
 * read with libyaml; cards may name a model profile from gpu-models.yaml), and the
 * container view of it selected by NVIDIA_VISIBLE_DEVICES.  Shared by the mock
 * NVML and mock CUDA libraries (compiled into each, hidden visibility). */
#ifndef GPUSHARE_INVENTORY_H
#define GPUSHARE_INVENTORY_H

#include <stddef.h>

#include "gpu_models.h"

#define INV_MAX_GPUS 64
#define INV_NAME_LEN 96
#define INV_UUID_LEN 80
#define INV_BUSID_LEN 32
#define INV_VERSION_LEN 32
#define INV_ERROR_LEN 1536

typedef struct {
    char name[INV_NAME_LEN];
    unsigned long long memory_mib;
    char uuid[INV_UUID_LEN];
    char pci_bus_id[INV_BUSID_LEN]; /* "00000000:00:07.0" */
    unsigned int physical_index;     /* index in the inventory file = minor number */
    gpu_model_t model;               /* the card's profile, inventory overrides applied */
    int lost;                        /* fallen off the bus: NVML counts it but gives no handle */
    unsigned int xid;                /* the card's last Xid (0: none); a change raises an NVML event */
} inv_gpu_t;

typedef struct {
    char driver_version[INV_VERSION_LEN];
    char cuda_version[INV_VERSION_LEN];
    int cuda_version_int; /* 11.4 -> 11040 */
    unsigned int gpu_count;
    inv_gpu_t gpus[INV_MAX_GPUS];
} inventory_t;

/* Parse the inventory file; on failure return -1 and write "PATH:LINE: why" to err. */
__attribute__((visibility("hidden")))
int inventory_parse_file(const char *path, inventory_t *inv, char *err, size_t errlen);

/* Parse from a string (path only names the source in messages). */
__attribute__((visibility("hidden")))
int inventory_parse_text(const char *text, const char *path, inventory_t *inv, char *err, size_t errlen);

/* Apply a NVIDIA_VISIBLE_DEVICES value (NULL = unset = all) to physical, writing the
 * container view (renumbered in listed order) to view.  -1 + err on a bad entry. */
__attribute__((visibility("hidden")))
int inventory_apply_visible(const inventory_t *physical, const char *visible, inventory_t *view,
                            char *err, size_t errlen);

/* Load GPUSHARE_MOCK_INVENTORY and apply NVIDIA_VISIBLE_DEVICES. */
__attribute__((visibility("hidden")))
int inventory_load_container_view(inventory_t *view, char *err, size_t errlen);

#endif
