"""The seed's stated limitation: memory is isolated, compute is not.

Reported as information in the verdict table, not as a failure. The check still
asserts what "compute shared" means for a pod: no compute limit is set in its
environment or resources, and the cards it sees are whole cards (not MIG slices).
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.limitation]

# Knobs other stacks use to cap compute; none may be set for a memory-only share.
COMPUTE_LIMIT_ENV = (
    "CUDA_DEVICE_SM_LIMIT",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "GPU_CORE_UTILIZATION_POLICY",
    "ALIYUN_COM_GPU_CORE",
    "GPUSHARE_COMPUTE_LIMIT",
)
COMPUTE_RESOURCES = ("nvidia.com/gpucores", "aliyun.com/gpu-core.percentage")


@pytest.mark.capacity(cards=1)
def test_compute_is_shared_not_isolated(suite):
    with allure.step("Run a share pod (2 GiB on one card)"):
        pod = suite.submit_share_pod("compute", 2, None)
        obj = suite.wait_running(pod)
    with allure.step("No compute limit in the pod's resources or environment"):
        limits = obj["spec"]["containers"][0].get("resources", {}).get("limits", {})
        asked = sorted(set(limits) & set(COMPUTE_RESOURCES))
        suite.expect(v.none_of("no_compute_resource", asked, "compute resources in the limits"))
        env = suite.env(pod)
        set_limits = {k: env[k] for k in COMPUTE_LIMIT_ENV if k in env}
        suite.expect(v.none_of("no_compute_limit_env", set_limits, "compute limits in the environment"))
    with allure.step("The card is a whole card: no MIG slice"):
        report = suite.nvidia_smi_exec(pod)
        slices = [g.index for g in report.gpus if g.mig_devices or (g.mig_mode or "").lower() == "enabled"]
        suite.expect(v.none_of("whole_card", slices, "cards that are MIG slices"))
    suite.info("compute_isolation", "not isolated: pods on a card share its compute (the seed's stated limitation)")
