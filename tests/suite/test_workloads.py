"""Rendering the seed's Job and share pods for a profile; node inventory reading; the run command."""

import argparse
import json

import pytest
import yaml

from gpushare_conformance.allocation import request_from_pod
from gpushare_conformance.commands.run import pytest_argv
from gpushare_conformance.fixtures.framework import submit
from gpushare_conformance.fixtures.inventory import InventoryError, load_inventory, node_gpus
from gpushare_conformance.profiles import get_profile

SEED_JOB = yaml.safe_load("""
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
        command: [python, tensorflow-sample-code/tfjob/docker/mnist/main.py, --max_steps=100000,
                  --data_dir=tensorflow-sample-code/data]
        resources:
          limits:
            aliyun.com/gpu-mem: 8
        workingDir: /root
      restartPolicy: Never
""")


def test_seed_job_for_reference_keeps_the_seed_request():
    job = submit.seed_job(SEED_JOB, get_profile("reference"), "seed", 8, 2)
    request = request_from_pod(job)
    assert (request.total_gib, request.cards, request.per_card_gib) == (8, 2, 4)
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["template"]["metadata"]["labels"]["app"] == "tensorflow-mnist-multigpu"
    assert SEED_JOB["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"aliyun.com/gpu-mem": 8}


def test_seed_job_for_hami_swaps_the_resource_names():
    job = submit.seed_job(SEED_JOB, get_profile("hami"), "seed", 8, 2)
    template = job["spec"]["template"]
    assert "aliyun.com/gpu-count" not in template["metadata"]["labels"]
    assert template["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4096}


def test_single_card_request_drops_the_count_label():
    job = submit.seed_job(SEED_JOB, get_profile("reference"), "single", 3, None, command=["sleep", "1"])
    assert "aliyun.com/gpu-count" not in job["spec"]["template"]["metadata"]["labels"]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "1"]


def test_share_pod_is_labelled_and_asks_its_share():
    pod = submit.share_pod(get_profile("reference"), "holder", "img", 6, 3)
    assert pod["metadata"]["labels"][submit.SUITE_LABEL] == "true"
    request = request_from_pod(pod)
    assert (request.total_gib, request.cards) == (6, 3)


def test_load_seed_job_from_the_mock_overlay_uses_the_renderer(tmp_path, monkeypatch):
    monkeypatch.setattr(submit, "MOCK_WORKLOADS", tmp_path)
    (tmp_path / "kustomization.yaml").write_text("resources: []\n")
    rendered = yaml.safe_dump_all([{"kind": "ConfigMap"}, dict(SEED_JOB)])
    assert submit.load_seed_job(True, render=lambda path: rendered)["metadata"]["name"] == "tensorflow-mnist-multigpu"
    with pytest.raises(submit.SubmitError, match="exactly one Job"):
        submit.load_seed_job(True, render=lambda path: "kind: ConfigMap\n")


CARDS = [{"index": i, "uuid": f"GPU-{i}", "memory_mib": 16160, "memory_gib": 15, "healthy": True} for i in range(4)]


def test_node_gpus_from_the_device_plugin_annotation():
    node = {
        "metadata": {"name": "n1", "annotations": {"gpushare.conformance.io/cards": json.dumps(CARDS)}},
        "status": {"allocatable": {"aliyun.com/gpu-mem": "60", "aliyun.com/gpu-count": "4"}},
    }
    gpus = node_gpus(node)
    assert (len(gpus.cards), gpus.card_gib, gpus.advertised_mem, gpus.advertised_count) == (4, 15, 60, 4)
    assert gpus.card(2).memory_mib == 16160


def test_node_gpus_without_annotation_sizes_cards_from_capacity():
    node = {
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"aliyun.com/gpu-mem": "30", "aliyun.com/gpu-count": "2"}},
    }
    gpus = node_gpus(node)
    assert gpus.card_gib == 15 and gpus.source.startswith("allocatable")


def test_bad_cards_annotation_is_an_error():
    node = {"metadata": {"name": "n1", "annotations": {"gpushare.conformance.io/cards": '[{"index": 0}]'}}}
    with pytest.raises(InventoryError, match="n1.*is not a list of cards"):
        node_gpus(node)


def test_inventory_validation(tmp_path):
    good = tmp_path / "inv.yaml"
    good.write_text("driver_version: '470.82.01'\ngpus:\n  - name: Tesla V100-SXM2-16GB\n    memory_mib: 16160\n")
    assert load_inventory(good)["gpus"][0]["memory_mib"] == 16160
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus:\n  - memory_mib: '16GB'\n")
    with pytest.raises(InventoryError, match=r"gpus\[0\].memory_mib"):
        load_inventory(bad)


def test_run_command_builds_the_pytest_line(tmp_path):
    args = argparse.Namespace(
        cluster="existing",
        stack="hami",
        report_dir=str(tmp_path),
        kubeconfig="/k",
        context=None,
        keep_cluster=True,
        kind_binary=None,
        pytest_args=["--", "-m", "seed"],
    )
    argv = pytest_argv(args)
    assert argv[argv.index("--pyargs") + 1] == "gpushare_conformance.conformance"
    assert argv[argv.index("--gpushare-cluster-kubeconfig") + 1] == "/k" and "--gpushare-keep-cluster-up" in argv
    assert argv[argv.index("--gpushare-cluster") + 1] == "existing"
    assert argv[argv.index("--gpushare-stack") + 1] == "hami"
    assert "--junitxml" in argv and str(tmp_path / "junit.xml") in argv
    assert str(tmp_path / "allure-results") in argv
    assert argv[-2:] == ["-m", "seed"] and "--" not in argv
