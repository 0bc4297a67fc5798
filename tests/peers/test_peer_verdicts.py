"""The whole suite against stacks we did not write, as a user runs it, and the verdict
table it must give.

No other sharing stack can be built here, so each peer is a flavor of the reference
stack that behaves as the peer documents (gpushare_doubles/flavors): deployed on the
peers' own one-node kind cluster (tests/peers/conftest.py), then judged by
``gpushare-conformance run --cluster existing --kubeconfig <its kubeconfig> --stack
<profile> -- --gpushare-mock-nvml``, exactly the command of docs/suite.md.

- gpushare-like (profile ``gpushare``): one card per pod, the gpu-count label ignored,
  no isolation. Single-card scheduling rules PASS; the multi-card rules FAIL with what
  the pod got; the isolation rules FAIL with the physical total as evidence; both are
  the profile's known gaps, and the table says so.
- hami-like (profile ``hami``): per-card MiB spelling, isolation that charges the CUDA
  context: every rule PASSES (nothing is calibrated to our own shim).

Neither run may raise an exception outside a verdict, nor skip for anything but what
the cluster lacks (this one has a single GPU node).
"""

from __future__ import annotations

import re

import pytest
from judged_runs import MOCK_CARD_HEALTH_S, assert_evidence_only, run_suite, table

from gpushare_conformance.summary import FAIL, INFO, NA, OPEN, PASS, conformance_line

pytestmark = [pytest.mark.e2e, pytest.mark.disruptive]

PHYSICAL_MIB = "16160"  # ci/local/inventory-default.yaml: V100-SXM2-16GB, as NVML reports it
SINGLE_CARD_RULES = ("share_fits_card", "capacity_returned", "restarts_lose_nothing", "memory_comes_back")
MULTI_CARD_RULES = ("multi_gpu_share", "card_count", "integer_share", "same_node", "distinct_cards")
ISOLATION_RULES = ("isolation_smi", "isolation_log", "alloc_past_share_refused", "one_budget_per_container")
# Without a share to lift, every hostile class stops at its premise: the pod is shown the card.
HOSTILE_RULES = (
    "hostile_environment",
    "hostile_accounting",
    "hostile_descendants",
    "hostile_loader",
    "hostile_processes",
    "hostile_stream_card",
    "hostile_namespaces",
    "beyond_interposition",
)
# What a refusal that did not happen shows: where the stack put the pod, never an exception.
NO_EXCEPTION_TEXT = re.compile(r"WaitFailed|WaitTimeout|gave up|Error:")


def _not_quoting_exceptions(lines) -> None:
    quoted = {r: line.figure for r, line in lines.items() if NO_EXCEPTION_TEXT.search(line.figure)}
    assert not quoted, quoted


@pytest.mark.on_stack("gpushare-like")
def test_gpushare_like_passes_single_card_rules_and_fails_multi_card_and_isolation_with_evidence(
    cluster, switch, tmp_path
):
    """Every row true, with its evidence: its own single-card rules hold (a restart read
    from the API, freed memory that comes back without a share); the multi-card and
    isolation rules fail as its README says; and what the open stack really does, the
    suite sees: a pod asking no GPU binds another pod through the extender it finds by
    its Service, and a card that falls off the bus stays advertised."""
    switch("gpushare-like")
    # Its device plugin never takes a sick card away: the two sick-card checks can only
    # wait out card_health.
    child, result = run_suite(cluster, tmp_path, "gpushare", timeouts={"card_health": MOCK_CARD_HEALTH_S})
    assert child.returncode == 1, f"a stack that breaks rules fails the run: exit {child.returncode}"
    assert_evidence_only(result, also_lacking=r"^not judged: ")
    lines = table(result)
    for rule in SINGLE_CARD_RULES:
        assert lines[rule].status == PASS, (rule, lines[rule].figure)
    for rule in MULTI_CARD_RULES + ISOLATION_RULES + HOSTILE_RULES:
        assert lines[rule].status == FAIL and lines[rule].known_gap, (rule, lines[rule].status, lines[rule].figure)
        assert "(known gap)" in lines[rule].shown_figure
    for rule in ("isolation_smi", "alloc_past_share_refused", "one_budget_per_container"):
        assert PHYSICAL_MIB in lines[rule].figure, (rule, lines[rule].figure)
    # The seed's Job got one card where it asked two, and that card whole.
    assert lines["card_count"].figure.startswith("1 card(s) visible, 2 expected"), lines["card_count"].figure
    assert lines["multi_gpu_share"].figure.startswith("1 card x ") and PHYSICAL_MIB in lines["multi_gpu_share"].figure
    assert lines["compute_shared"].status == INFO
    assert lines["dra_consumable_capacity"].status == NA, lines["dra_consumable_capacity"]
    # Found at its Service (12345, node port 32766), not at an address the profile assumed.
    bind = lines["hostile_extender"]
    assert bind.status == FAIL and not bind.known_gap, (bind.status, bind.figure)
    assert re.search(r"answers: http://\S+:(12345|32766)/gpushare-scheduler/bind 200", bind.figure), bind.figure
    # Its inspect answers anyone who reaches it, naming every GPU pod and its cards.
    view = lines["hostile_extender_view"]
    assert view.status == FAIL and not view.known_gap, (view.status, view.figure)
    assert re.search(r"/gpushare-scheduler/inspect 200", view.figure), view.figure
    # Decided by a card turning sick, on the mock node under the existing provider.
    sick = lines["node_advertises"]
    assert sick.status == FAIL and not sick.known_gap and "advertised by" in sick.figure, (sick.status, sick.figure)
    # Pods created together: its device plugin serves them by bind order, which the
    # kubelet's admission order need not follow. A known gap; when it shows, the figure
    # is the card a pod got instead of its own.
    burst = lines["bursts_not_overbooked"]
    assert burst.known_gap and burst.status in (PASS, FAIL), (burst.status, burst.figure)
    assert burst.status == PASS or "nvidia-smi in it shows" in burst.figure, burst.figure
    _not_quoting_exceptions(lines)
    assert conformance_line(list(lines.values())).startswith("conforms to the seed: no (")
    assert "conforms to the seed: no" in child.stdout


@pytest.mark.on_stack("hami-like")
def test_hami_like_passes_every_seed_rule_and_fails_the_hostile_workload_rules_it_breaks(cluster, switch, tmp_path):
    """Every seed rule holds on the HAMi-like stack. What a hostile pod can do to it is
    told apart, with the evidence: HAMi's library takes its limits from the container's
    environment (clearing CUDA_DEVICE_MEMORY_LIMIT_<i> lifts them) and keeps its
    accounting in a file the container can replace, its scheduler
    extender answers whoever reaches it (a pod binds another pod), and its device plugin
    serves whatever pod carries an allocation in the making (a pod created with another
    pod's annotations gets its cards)."""
    switch("hami-like")
    child, result = run_suite(cluster, tmp_path, "hami")
    lines = table(result)
    failed = {r: line.figure for r, line in lines.items() if line.status not in (PASS, INFO, NA)}
    # It allocates through the device plugin API, not DRA: DRA's own promises do not apply.
    assert lines["dra_consumable_capacity"].status == NA, lines["dra_consumable_capacity"]
    hostile = {
        "hostile_environment",
        "hostile_accounting",
        "hostile_extender",
        "hostile_allocation",
        "hostile_loader",
        "hostile_stream_card",
    }
    assert set(failed) == hostile | {"hostile_processes", "beyond_interposition"}, failed
    assert lines["beyond_interposition"].status == OPEN, failed
    # HAMi-core holds dlsym only: each loader trick reaches the driver past it.
    assert "granted (exit 0), want CUDA_ERROR_OUT_OF_MEMORY" in failed["hostile_loader"], failed
    # Its accounting lives in a file of the container's /tmp (HAMi-core's shared cache
    # does too): a new file put at its path starts the count afresh.
    assert re.search(r"after: .*replaced /tmp/\S+", failed["hostile_accounting"]), failed
    assert "granted (exit 0), want CUDA_ERROR_OUT_OF_MEMORY" in failed["hostile_accounting"], failed
    # It charges the current card, not the stream's.
    assert "on a stream of card 1" in failed["hostile_stream_card"], failed
    # It charges each process's context even past the share: 8 processes take the card past it.
    assert re.search(r"\d+ MiB of card \d+ for a 1024 MiB share", failed["hostile_processes"]), failed
    assert "granted (exit 0), want CUDA_ERROR_OUT_OF_MEMORY" in failed["hostile_environment"], failed
    assert "CUDA_DEVICE_MEMORY_LIMIT_0" in failed["hostile_environment"], failed
    # Reached at its leader's Service (443, node port 31998) or its pod's port 80, at /bind.
    assert re.search(r"answers: http://\S+:(443|80|31998)/bind 200", failed["hostile_extender"]), failed
    assert "want None" in failed["hostile_extender"], failed
    assert "card 0:" in failed["hostile_allocation"], failed
    assert not any(lines[r].known_gap for r in failed)
    # Its device plugin's pod holds its vGPU monitor too: NVML was read in the container
    # that mounts the kubelet's directory, and the restarts were judged from the API.
    assert lines["node_advertises"].status == PASS and lines["restarts_lose_nothing"].status == PASS
    _not_quoting_exceptions(lines)
    assert_evidence_only(result)
    assert child.returncode == 1, child.stdout[-3000:]
    assert "conforms to the seed: no (7 rules failed)" in child.stdout
    # Judged on what the pod was told: HAMi's library keeps about 300 MiB per process.
    told = [r for r in result.records if r.base_check == "share_usable"]
    assert told and all(r.passed for r in told), told
    assert any("300 MiB for contexts" in r.detail for r in told), [r.detail for r in told]
    # Its device plugin names cards in NVIDIA_VISIBLE_DEVICES only, so its nodes keep
    # the toolkit's defaults, and a pod asking no GPU takes every card by naming them.
    no_gpu = [r for r in result.records if r.base_check == "no_gpu_pod_sees_no_card"]
    assert no_gpu and not no_gpu[0].passed and "nvidia-smi card 3:" in no_gpu[0].detail, no_gpu
