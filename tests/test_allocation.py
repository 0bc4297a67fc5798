"""The request model (N GiB over M cards) and the verdict helpers."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gpushare_conformance.allocation import (
    DEFAULT_TOLERANCE,
    RequestError,
    ShareRequest,
    Verdict,
    card_totals_mib,
    check_card_count,
    check_card_total,
    request_from_pod,
)
from gpushare_conformance.evidence import parse_nvidia_smi, parse_tf_log

SAMPLES = Path(__file__).parent / "evidence" / "samples"

SEED_JOB = yaml.safe_load(
    """
apiVersion: batch/v1
kind: Job
metadata:
  name: tensorflow-mnist-multigpu
spec:
  parallelism: 1
  template:
    metadata:
      labels:
        app: tensorflow-mnist-multigpu
        aliyun.com/gpu-count: "2"
    spec:
      containers:
      - name: tensorflow-mnist-multigpu
        image: registry.cn-beijing.aliyuncs.com/ai-samples/gpushare-sample:tensorflow-1.5
        resources:
          limits:
            aliyun.com/gpu-mem: 8
        workingDir: /root
      restartPolicy: Never
"""
)


def pod(mem=8, count: object = "2", containers=None) -> dict:
    labels = {"app": "x"}
    if count is not None:
        labels["aliyun.com/gpu-count"] = count
    if containers is None:
        containers = [{"name": "main", "resources": {"limits": {"aliyun.com/gpu-mem": mem}}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": labels},
        "spec": {"containers": containers},
    }


def _error(obj, *fragments: str, **kwargs) -> RequestError:
    with pytest.raises(RequestError) as info:
        request_from_pod(obj, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)
    return info.value


def test_seed_job() -> None:
    assert request_from_pod(SEED_JOB) == ShareRequest(
        total_gib=8, cards=2, per_card_gib=4, container="tensorflow-mnist-multigpu"
    )
    assert request_from_pod(SEED_JOB).per_card_mib == 4096


def test_pod_and_template_and_job_agree() -> None:
    template = SEED_JOB["spec"]["template"]
    as_pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "template": copy.deepcopy(template)}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": copy.deepcopy(template)}}
    cronjob = {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": copy.deepcopy(template)}}}}
    results = {request_from_pod(obj) for obj in (SEED_JOB, template, as_pod, pod_template, deployment, cronjob)}
    assert results == {ShareRequest(8, 2, 4, "tensorflow-mnist-multigpu")}


def test_api_style_string_quantities_and_absent_label() -> None:
    assert request_from_pod(pod(mem="6", count=None)) == ShareRequest(6, 1, 6, "main")


def test_sums_over_containers() -> None:
    containers = [
        {"name": "a", "resources": {"limits": {"aliyun.com/gpu-mem": "2"}}},
        {"name": "b", "resources": {"limits": {"aliyun.com/gpu-mem": 4}, "requests": {"aliyun.com/gpu-mem": "4"}}},
        {"name": "sidecar", "resources": {"limits": {"cpu": "1"}}},
    ]
    assert request_from_pod(pod(count="3", containers=containers)) == ShareRequest(6, 3, 2, None)


def test_renamed_resources() -> None:
    obj = pod(count=None, containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "4"}}}])
    obj["metadata"]["labels"]["example.com/cards"] = "2"
    assert request_from_pod(obj, mem_resource="nvidia.com/gpumem", count_label="example.com/cards") == ShareRequest(
        4, 2, 2, "c"
    )
    _error(obj, "aliyun.com/gpu-mem")  # default names do not see it


def test_not_divisible_matches_ack_message() -> None:
    error = _error(
        pod(mem=8, count="3"), "invalid replica for resource aliyun.com/gpu-mem: 8 / 3 = 2.67 is not an integer"
    )
    assert error.value == 8


@pytest.mark.parametrize("count", ["0", "-1"])
def test_card_count_below_one(count: str) -> None:
    error = _error(pod(count=count), "aliyun.com/gpu-count")
    assert error.field == "metadata.labels[aliyun.com/gpu-count]" and error.value == count


@pytest.mark.parametrize("count", [2, "two", "2.0", " 2", "", True])
def test_label_not_a_string_integer(count) -> None:
    error = _error(pod(count=count), "must be a string integer", repr(count))
    assert error.value == count


def test_memory_missing() -> None:
    error = _error(
        pod(containers=[{"name": "c", "resources": {"limits": {"cpu": "1"}}}]),
        "no container sets resources.limits[aliyun.com/gpu-mem]",
    )
    assert error.value is None


@pytest.mark.parametrize("mem", [0, "0", -4, "8Gi", 2.5, "1.5", True, None])
def test_memory_not_a_positive_integer(mem) -> None:
    error = _error(pod(mem=mem), "spec.containers[0].resources.limits[aliyun.com/gpu-mem]", repr(mem))
    assert error.value == mem


def test_template_paths_in_errors() -> None:
    job = copy.deepcopy(SEED_JOB)
    job["spec"]["template"]["metadata"]["labels"]["aliyun.com/gpu-count"] = "x"
    assert _error(job).field == "spec.template.metadata.labels[aliyun.com/gpu-count]"


def test_requests_without_limits_or_different() -> None:
    _error(
        pod(containers=[{"name": "c", "resources": {"requests": {"aliyun.com/gpu-mem": "8"}}}]),
        "requests but not in limits",
    )
    _error(
        pod(
            containers=[
                {
                    "name": "c",
                    "resources": {"limits": {"aliyun.com/gpu-mem": "8"}, "requests": {"aliyun.com/gpu-mem": "4"}},
                }
            ]
        ),
        "differs",
    )


def test_not_a_pod() -> None:
    _error({"kind": "Service", "spec": {"ports": []}}, "neither spec.containers nor spec.template")
    _error(["not", "a", "dict"], "mapping")
    _error(pod(containers=[]), "spec.containers is empty")


# --- verdicts ---------------------------------------------------------------


def test_card_count() -> None:
    assert check_card_count(2, 2) == Verdict("card_count", 2, 2, True, "2 card(s) visible, 2 expected")
    failed = check_card_count(4, 2)
    assert not failed.passed and failed.expected == 2 and failed.observed == 4 and "mismatch" in failed.detail


def test_card_total_accepts_the_seed_and_the_exact_share() -> None:
    seed = check_card_total(4309, 4, 16160)
    assert seed.passed and seed.observed == 4309 and "+5.2%" in seed.detail
    assert check_card_total(4096, 4, 16160).passed
    assert check_card_total(int(4096 * (1 + DEFAULT_TOLERANCE)), 4, 16160).passed
    assert not check_card_total(int(4096 * (1 + DEFAULT_TOLERANCE)) + 1, 4, 16160).passed


@pytest.mark.parametrize("observed", [16160, 16384, 20000])
def test_card_total_rejects_the_physical_size_and_above(observed: int) -> None:
    verdict = check_card_total(observed, 4, 16160)
    assert not verdict.passed and verdict.expected["below_physical_mib"] == 16160


def test_card_total_rejects_physical_even_for_a_near_whole_card_share() -> None:
    assert check_card_total(15400, 15, 16160).passed
    assert not check_card_total(16160, 15, 16160).passed


@pytest.mark.parametrize("observed", [4095, 2048, 4600, 8192])
def test_card_total_rejects_outside_the_window(observed: int) -> None:
    verdict = check_card_total(observed, 4, 16160)
    assert not verdict.passed
    assert verdict.expected["min_mib"] == 4096


def test_card_total_unknown() -> None:
    verdict = check_card_total(None, 4, 16160)
    assert not verdict.passed and "not reported" in verdict.detail
    assert check_card_total(4309, 4, None).passed
    with pytest.raises(ValueError):
        check_card_total(4309, 4, 16160, tolerance=-0.1)


def test_verdict_to_dict() -> None:
    assert check_card_count(1, 1).to_dict() == {
        "check": "card_count",
        "expected": 1,
        "observed": 1,
        "passed": True,
        "detail": "1 card(s) visible, 1 expected",
    }


def test_card_totals_from_reports() -> None:
    smi = parse_nvidia_smi((SAMPLES / "nvidia-smi" / "seed_470_v100_share.txt").read_text())
    assert card_totals_mib(smi) == {0: 4309, 1: 4309}
    tf = parse_tf_log((SAMPLES / "tf-log" / "tf_1.5_found_device_seed.log").read_text())
    assert card_totals_mib(tf) == {0: 4311, 1: 4311}  # 4.21GiB as printed
    assert all(check_card_total(total, 4, 16160).passed for total in card_totals_mib(tf).values())
    limit_only = parse_tf_log((SAMPLES / "tf-log" / "tf_2.11_created_device.log").read_text())
    assert card_totals_mib(limit_only) == {0: None, 1: None}
    with pytest.raises(TypeError):
        card_totals_mib({"gpus": []})
