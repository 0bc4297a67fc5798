/* Mock NVML device state: clocks, PCIe, power, thermals, utilization, ECC, modes,
 * clock event reasons, topology and MIG.  An idle card at P0 under the model profile's
 * constants (gpu-models.yaml, inventory overrides applied); a feature the profile
 * lacks answers NVML_ERROR_NOT_SUPPORTED, as on a real card without it. */
#include "nvml_engine.h"

#include <string.h>

/* ---- clocks ------------------------------------------------------------------- */

static nvmlReturn_t clock_of(const gpu_model_t *m, nvmlClockType_t type, nvmlClockId_t id, unsigned int *mhz) {
    switch (id) {
    case NVML_CLOCK_ID_CURRENT:
        switch (type) {
        case NVML_CLOCK_GRAPHICS:
        case NVML_CLOCK_SM: *mhz = m->clock_graphics_idle_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_MEM: *mhz = m->clock_memory_idle_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_VIDEO: *mhz = m->clock_graphics_idle_mhz * m->clock_video_max_mhz / (m->clock_graphics_max_mhz ? m->clock_graphics_max_mhz : 1); return NVML_SUCCESS;
        default: return NVML_ERROR_INVALID_ARGUMENT;
        }
    case NVML_CLOCK_ID_APP_CLOCK_TARGET:
    case NVML_CLOCK_ID_APP_CLOCK_DEFAULT:
        switch (type) {
        case NVML_CLOCK_GRAPHICS:
        case NVML_CLOCK_SM: *mhz = m->clock_graphics_default_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_MEM: *mhz = m->clock_memory_default_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_VIDEO: return NVML_ERROR_NOT_SUPPORTED;
        default: return NVML_ERROR_INVALID_ARGUMENT;
        }
    case NVML_CLOCK_ID_CUSTOMER_BOOST_MAX:
        switch (type) {
        case NVML_CLOCK_GRAPHICS: *mhz = m->clock_graphics_max_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_SM: *mhz = m->clock_sm_max_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_MEM: *mhz = m->clock_memory_max_mhz; return NVML_SUCCESS;
        case NVML_CLOCK_VIDEO: *mhz = m->clock_video_max_mhz; return NVML_SUCCESS;
        default: return NVML_ERROR_INVALID_ARGUMENT;
        }
    default: return NVML_ERROR_INVALID_ARGUMENT;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType, nvmlClockId_t clockId,
                                       unsigned int *clockMHz) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(clockMHz);
    return clock_of(&gpu->model, clockType, clockId, clockMHz);
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    return nvmlDeviceGetClock(device, type, NVML_CLOCK_ID_CURRENT, clock);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    return nvmlDeviceGetClock(device, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    return nvmlDeviceGetClock(device, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}
EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    return nvmlDeviceGetClock(device, type, NVML_CLOCK_ID_APP_CLOCK_TARGET, clock);
}
EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, nvmlClockType_t type,
                                                          unsigned int *clock) {
    return nvmlDeviceGetClock(device, type, NVML_CLOCK_ID_APP_CLOCK_DEFAULT, clock);
}

/* An idle card: the GPU is idle and application clocks are at their default. */
static nvmlReturn_t event_reasons(nvmlDevice_t device, unsigned long long *reasons, int supported) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(reasons);
    *reasons = supported ? nvmlClocksEventReasonAll : nvmlClocksEventReasonGpuIdle;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *r) {
    return event_reasons(device, r, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) {
    return event_reasons(device, r, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long *r) {
    return event_reasons(device, r, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) {
    return event_reasons(device, r, 1);
}

/* ---- PCIe ---------------------------------------------------------------------- */

static nvmlReturn_t pcie_value(nvmlDevice_t device, unsigned int *out, int width) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(out);
    *out = width ? gpu->model.pcie_width : gpu->model.pcie_generation;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return pcie_value(d, v, 0); }
EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return pcie_value(d, v, 0); }
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return pcie_value(d, v, 0); }
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return pcie_value(d, v, 1); }
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return pcie_value(d, v, 1); }

/* Per-lane transfer rate in MB/s-ish units NVML uses (NVML_PCIE_LINK_MAX_SPEED_*). */
static unsigned int lane_speed(unsigned int generation) {
    switch (generation) {
    case 1: return NVML_PCIE_LINK_MAX_SPEED_2500MBPS;
    case 2: return NVML_PCIE_LINK_MAX_SPEED_5000MBPS;
    case 3: return NVML_PCIE_LINK_MAX_SPEED_8000MBPS;
    case 4: return NVML_PCIE_LINK_MAX_SPEED_16000MBPS;
    case 5: return NVML_PCIE_LINK_MAX_SPEED_32000MBPS;
    case 6: return NVML_PCIE_LINK_MAX_SPEED_64000MBPS;
    default: return NVML_PCIE_LINK_MAX_SPEED_INVALID;
    }
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, unsigned int *maxSpeed) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(maxSpeed);
    *maxSpeed = lane_speed(gpu->model.pcie_generation);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int *pcieSpeed) {
    return nvmlDeviceGetPcieLinkMaxSpeed(device, pcieSpeed);
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int *value) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(value);
    if (counter >= NVML_PCIE_UTIL_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    *value = 0; /* KB/s: an idle card moves nothing */
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(value);
    *value = 0;
    return NVML_SUCCESS;
}

/* ---- power ---------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(power);
    *power = gpu->model.power_idle_w * 1000;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(limit);
    *limit = gpu->model.power_limit_w * 1000;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    return nvmlDeviceGetPowerManagementLimit(device, limit);
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit) {
    return nvmlDeviceGetPowerManagementLimit(device, limit);
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
                                                                  unsigned int *maxLimit) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(minLimit, maxLimit);
    *minLimit = gpu->model.power_min_limit_w * 1000;
    *maxLimit = gpu->model.power_max_limit_w * 1000;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, nvmlEnableState_t *mode) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(mode);
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(pState);
    *pState = NVML_PSTATE_0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t *pState) {
    return nvmlDeviceGetPerformanceState(device, pState);
}

/* ---- thermals and fans ------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(temp);
    if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = gpu->model.temp_idle_c + gpu->physical_index % 5; /* cards differ a little */
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t type,
                                                      unsigned int *temp) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(temp);
    switch (type) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: *temp = gpu->model.temp_shutdown_c; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: *temp = gpu->model.temp_slowdown_c; return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: *temp = gpu->model.temp_max_operating_c; return NVML_SUCCESS;
    default: return type >= NVML_TEMPERATURE_THRESHOLD_COUNT ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
    }
}
EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(numFans);
    if (gpu->model.fans == 0) return NVML_ERROR_NOT_SUPPORTED; /* passively cooled */
    *numFans = gpu->model.fans;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(speed);
    if (gpu->model.fans == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (fan >= gpu->model.fans) return NVML_ERROR_INVALID_ARGUMENT;
    *speed = gpu->model.fan_speed_percent;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    return nvmlDeviceGetFanSpeed_v2(device, 0, speed);
}

/* ---- utilization: an idle card ------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(utilization);
    utilization->gpu = 0;
    utilization->memory = 0;
    return NVML_SUCCESS;
}
static nvmlReturn_t codec_utilization(nvmlDevice_t device, unsigned int *utilization, unsigned int *period) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(utilization, period);
    *utilization = 0;
    *period = 167000; /* µs, the driver's sampling period */
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) {
    return codec_utilization(d, u, p);
}
EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) {
    return codec_utilization(d, u, p);
}

/* ---- ECC ---------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(current, pending);
    if (!gpu->model.ecc) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(eccCounts);
    if (errorType >= NVML_MEMORY_ERROR_TYPE_COUNT || counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu->model.ecc) return NVML_ERROR_NOT_SUPPORTED;
    *eccCounts = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                    nvmlEccCounterType_t counterType,
                                                    nvmlMemoryLocation_t locationType, unsigned long long *count) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(count);
    if (errorType >= NVML_MEMORY_ERROR_TYPE_COUNT || counterType >= NVML_ECC_COUNTER_TYPE_COUNT ||
        locationType >= NVML_MEMORY_LOCATION_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu->model.ecc) return NVML_ERROR_NOT_SUPPORTED;
    *count = 0;
    return NVML_SUCCESS;
}

/* ---- modes -------------------------------------------------------------------------- */

static nvmlReturn_t fixed_state(nvmlDevice_t device, nvmlEnableState_t *out, nvmlEnableState_t value) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(out);
    *out = value;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t *m) {
    return fixed_state(d, m, NVML_FEATURE_ENABLED);
}
EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t d, nvmlEnableState_t *m) {
    return fixed_state(d, m, NVML_FEATURE_DISABLED);
}
EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t d, nvmlEnableState_t *m) {
    return fixed_state(d, m, NVML_FEATURE_DISABLED);
}
EXPORT nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t d, nvmlEnableState_t *m) {
    return fixed_state(d, m, NVML_FEATURE_DISABLED);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(mode);
    *mode = NVML_COMPUTEMODE_DEFAULT;
    return NVML_SUCCESS;
}

/* ---- topology: cards of one node behind one host bridge; no NVLink -------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                        nvmlGpuTopologyLevel_t *pathInfo) {
    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;
    if (!nvml_gpu(device1) || !nvml_gpu(device2)) return NVML_ERROR_INVALID_ARGUMENT;
    CHECK_OUT(pathInfo);
    *pathInfo = device1 == device2 ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_HOSTBRIDGE;
    return NVML_SUCCESS;
}

/* ---- MIG -------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(currentMode, pendingMode);
    if (!gpu->model.mig) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    CHECK_DEVICE(device, gpu);
    (void)gpu;
    CHECK_OUT(isMigDevice);
    *isMigDevice = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    CHECK_DEVICE(device, gpu);
    CHECK_OUT(count);
    if (!gpu->model.mig) return NVML_ERROR_NOT_SUPPORTED;
    *count = 7;
    return NVML_SUCCESS;
}
