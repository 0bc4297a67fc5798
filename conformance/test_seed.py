"""The seed scenario: the multi-GPU TensorFlow Job, verified as the seed verifies it.

Submit the Job (8 GiB over 2 cards); in a terminal in its pod `nvidia-smi` lists
exactly 2 cards, each with about 4 GiB in total and well below the physical card; the
pod's log shows the per-card `totalMemory:` line twice, about 4 GiB each.
"""

from __future__ import annotations

import re

import allure
import pytest

from gpushare_conformance.allocation import card_totals_mib, check_card_count, check_card_total
from gpushare_conformance.fixtures.framework import verdicts as v
from gpushare_conformance.fixtures.framework.evidence import pod_logs

pytestmark = [pytest.mark.e2e, pytest.mark.seed]

TOTAL_GIB, CARDS = 8, 2
TOTAL_MEMORY_LINE = re.compile(r"totalMemory:\s*([0-9.]+)\s*GiB")


def _verify_smi(suite, pod: str, report, how: str) -> None:
    obj = suite.pod(pod)
    with suite.gathering():
        suite.expect(check_card_count(len(report.gpus), CARDS))
        for visible, total in sorted(card_totals_mib(report).items()):
            with allure.step(f"{how}: card {visible} shows about {TOTAL_GIB // CARDS} GiB, below the physical card"):
                suite.expect(check_card_total(total, TOTAL_GIB // CARDS, suite.physical_mib(obj, visible)))


@pytest.mark.capacity(cards=CARDS)
def test_seed_job_gets_4gib_on_each_of_2_cards(suite):
    if suite.max_cards < CARDS:
        pytest.skip(f"the seed needs {CARDS} cards on one node; the largest GPU node has {suite.max_cards}")
    with allure.step(f"Create the seed's Job: aliyun.com/gpu-mem {TOTAL_GIB}, gpu-count {CARDS}"):
        job = suite.submit_seed_job(total_gib=TOTAL_GIB, cards=CARDS)
    with allure.step("Wait for the Job's pod to run"):
        pod = suite.job_pod(job)
        suite.wait_running(pod)

    # Every step is judged even when an earlier one failed: a stack that gives one card
    # of 8 GiB is shown with its card count, its totals and its log alike.
    with suite.gathering():
        with allure.step("Terminal (API exec): nvidia-smi lists 2 cards of about 4 GiB"):
            _verify_smi(suite, pod, suite.nvidia_smi_exec(pod), "API exec")
        with allure.step("Terminal (kubectl exec -it, interactive): nvidia-smi lists 2 cards of about 4 GiB"):
            _verify_smi(suite, pod, suite.nvidia_smi_terminal(pod), "interactive terminal")

        with allure.step("Logs: the totalMemory line appears twice, about 4 GiB each"):
            report = suite.tf_log(pod, CARDS)
            lines = TOTAL_MEMORY_LINE.findall(pod_logs(suite.kube, suite.namespace, pod))
            suite.expect(v.equal("total_memory_lines", CARDS, len(lines), f"'totalMemory:' lines in the log {lines}"))
            suite.expect(check_card_count(len(report.devices), CARDS))
            obj = suite.pod(pod)
            for visible, total in sorted(card_totals_mib(report).items()):
                suite.expect(check_card_total(total, TOTAL_GIB // CARDS, suite.physical_mib(obj, visible)))
