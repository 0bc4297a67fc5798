"""The reference stack's fault switches (no cluster): off by default, each breaks one rule.

``test_checks_catch_broken_stacks.py`` deploys them and shows the checks turn red;
here each fault is driven through the real extender state, annotations, Allocate
matching and environment code, so a fault that stopped breaking anything (or a
default that started to) is caught without a cluster.
"""

from __future__ import annotations

import glob
import json
import logging
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpushare_doubles import faults, registry
from gpushare_stack import contract
from gpushare_stack.allocation import bind_annotations
from gpushare_stack.deviceplugin import __main__ as plugin_main
from gpushare_stack.deviceplugin.container_files import prepared_usage_file
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.deviceplugin.matching import match_allocation
from gpushare_stack.deviceplugin.plugin import DevicePlugin
from gpushare_stack.extender import __main__ as extender_main
from gpushare_stack.extender.state import ClusterState
from gpushare_stack.request import ShareRequestError, share_request

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
V100_MIB = 16160
NODE = "n1"


def share_pod(name: str, gib: int, count: int) -> dict:
    """A pending pod asking ``gib`` GiB over ``count`` cards (API JSON form)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": str(uuid.uuid4()),
            "labels": {contract.LABEL_COUNT: str(count)},
            "annotations": {},
        },
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {contract.RESOURCE_MEM: str(gib)}}}
            ]
        },
        "status": {"phase": "Pending"},
    }


def four_card_node() -> dict:
    cards = [
        {"index": i, "uuid": f"GPU-{i}", "memory_mib": V100_MIB, "memory_gib": 15, "healthy": True} for i in range(4)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "annotations": {contract.NODE_CARDS_ANNOTATION: json.dumps(cards)}},
        "status": {"capacity": {contract.RESOURCE_MEM: "60", contract.RESOURCE_COUNT: "4"}},
    }


def extender(fault: str | None) -> ClusterState:
    state = ClusterState(flavor=registry.extender(fault=fault))
    state.replace_nodes([four_card_node()])
    state.replace_pods([])
    return state


def bound(state: ClusterState, pod: dict) -> dict:
    """The pod as the API server holds it after the extender's bind."""
    alloc = state.assume(pod, NODE)
    return {
        **pod,
        "metadata": {**pod["metadata"], "annotations": bind_annotations(alloc)},
        "spec": {**pod["spec"], "nodeName": NODE},
    }


def device_plugin(fault: str | None = None) -> DevicePlugin:
    cards = [GpuCard(i, f"GPU-{i}", "Tesla V100-SXM2-16GB", V100_MIB) for i in range(4)]
    return DevicePlugin(node=NODE, discover=lambda: list(cards), kube=None, flavor=registry.device_plugin(fault=fault))


def limits(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(contract.ENV_LIMIT_ALL)}


# ---------------------------------------------------------------- uneven-split
@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.integers(0, 7), st.integers(1, 15), min_size=1, max_size=8))
def test_uneven_split_keeps_the_sum_and_skews_first_and_last_card(cards):
    skewed = faults.uneven_split(cards)
    assert sum(skewed.values()) == sum(cards.values()) and set(skewed) == set(cards)
    order = sorted(cards)
    if len(order) == 1:
        assert skewed == cards
    else:
        assert skewed[order[0]] == cards[order[0]] + 1 and skewed[order[-1]] == cards[order[-1]] - 1


@pytest.mark.parametrize(("fault", "expected"), [(None, {0: 4, 1: 4}), (faults.UNEVEN_SPLIT, {0: 5, 1: 3})])
def test_seed_request_reaches_the_container_limits_as_the_extender_split_it(fault, expected):
    state = extender(fault)
    pod = bound(state, share_pod("seed", 8, 2))
    assert state.allocation(pod["metadata"]["uid"]).containers == {0: expected}
    match = match_allocation([pod], NODE, 8, {})
    assert match.shares_gib == tuple(expected.values())
    env, _ = device_plugin().allocation_environment(match)
    assert limits(env) == {f"{contract.ENV_LIMIT_PREFIX}{i}": f"{g}GiB" for i, g in enumerate(expected.values())}
    assert env[contract.ENV_POD] == "8"


def test_device_plugin_refuses_per_card_figures_that_do_not_add_up():
    pod = bound(extender(None), share_pod("seed", 8, 2))
    pod["metadata"]["annotations"][contract.ANN_ACK_ALLOCATION] = '{"0":{"0":4,"1":3}}'
    with pytest.raises(LookupError, match=r"does not add up to its aliyun.com/gpu-mem=8"):
        match_allocation([pod], NODE, 8, {})


# ---------------------------------------------------------- ignore-integer-rule
def test_integer_rule_holds_by_default_and_the_fault_floors_the_share():
    odd = share_pod("odd", 3, 2)
    with pytest.raises(ShareRequestError, match="N/M must be an integer"):
        share_request(odd)
    normal = extender(None).filter(odd, [NODE])
    assert normal.fits == [] and "N/M must be an integer" in normal.unresolvable[NODE]

    broken = extender(faults.IGNORE_INTEGER_RULE)
    assert broken.filter(odd, [NODE]).fits == [NODE]
    pod = bound(broken, odd)
    assert broken.allocation(pod["metadata"]["uid"]).containers == {0: {0: 1, 1: 1}}
    assert pod["metadata"]["annotations"][contract.ANN_POD] == "2"


def test_ignore_integer_rule_still_checks_everything_else():
    with pytest.raises(ShareRequestError, match="must be >= 1"):
        faults.ignore_integer_rule(share_pod("zero", 3, 0))


# ----------------------------------------------------------------- no-isolation
@pytest.mark.parametrize("fault", [None, faults.NO_ISOLATION])
def test_no_isolation_drops_only_the_shim_and_its_limits(fault):
    state = extender(None)
    match = match_allocation([bound(state, share_pod("seed", 8, 2))], NODE, 8, {})
    sound, sound_mounts = device_plugin().allocation_environment(match)
    env, mounts = device_plugin(fault).allocation_environment(match)
    assert mounts == sound_mounts
    if fault is None:
        assert env == sound and env[contract.ENV_LD_PRELOAD] == contract.SHIM_PATH
        assert limits(env) == {"GPUSHARE_MEMORY_LIMIT_0": "4GiB", "GPUSHARE_MEMORY_LIMIT_1": "4GiB"}
    else:
        assert contract.ENV_LD_PRELOAD not in env and limits(env) == {}
        assert env == {k: v for k, v in sound.items() if k != contract.ENV_LD_PRELOAD and k not in limits(sound)}
        assert env[contract.ENV_VISIBLE] == "0,1"


# ------------------------------------------------------------- shim faults
@pytest.mark.parametrize("fault", faults.SHIM_FAULTS)
def test_shim_faults_reach_the_container_env_with_the_fault_build_and_change_nothing_else(fault):
    match = match_allocation([bound(extender(None), share_pod("seed", 8, 2))], NODE, 8, {})
    sound, sound_mounts = device_plugin().allocation_environment(match)
    env, mounts = device_plugin(fault).allocation_environment(match)
    assert faults.SHIM_FAULT_ENV not in sound and sound[contract.ENV_LD_PRELOAD] == contract.SHIM_PATH
    # the fault build of the shim (the shipped one has no fault switch), and the fault
    assert env == {**sound, contract.ENV_LD_PRELOAD: contract.SHIM_FAULTS_PATH, faults.SHIM_FAULT_ENV: fault}
    assert mounts == sound_mounts


# --------------------------------------------------------- shared-accounting
def test_shared_accounting_gives_every_container_one_usage_file_and_its_own_limits(tmp_path):
    state = extender(None)
    pods = [bound(state, share_pod(name, 2, 1)) for name in ("a", "b")]

    def files(fault: str | None) -> list[dict[str, str]]:
        plugin = DevicePlugin(
            node=NODE,
            discover=lambda: [GpuCard(i, f"GPU-{i}", "Tesla V100-SXM2-16GB", V100_MIB) for i in range(4)],
            kube=None,
            flavor=registry.device_plugin(fault=fault),
            containers_dir=str(tmp_path / str(fault)),
        )
        (tmp_path / str(fault)).mkdir()
        out = []
        for pod in pods:
            _env, mounts = plugin.allocation_environment(match_allocation([pod], NODE, 2, {}))
            out.append({m.container_path: m.host_path for m in mounts})
        return out

    sound, broken = files(None), files(faults.SHARED_ACCOUNTING)
    usage, limits_file = contract.CONTAINER_USAGE_FILE, contract.CONTAINER_LIMITS_FILE
    assert sound[0][usage] != sound[1][usage], "each container has its own accounting"
    assert broken[0][usage] == broken[1][usage] == str(tmp_path / faults.SHARED_ACCOUNTING / faults.SHARED_USAGE_NAME)
    assert broken[0][limits_file] != broken[1][limits_file], "only the accounting is shared"
    with open(broken[0][usage], "rb") as f:
        assert f.read() == prepared_usage_file(), "prepared like any container's"


# -------------------------------------------------- isolation-files-writable
def test_isolation_files_writable_mounts_limits_and_preload_read_write_and_nothing_else(tmp_path):
    pod = bound(extender(None), share_pod("a", 2, 1))

    def mounts(fault: str | None) -> dict[str, tuple[str, bool]]:
        (tmp_path / str(fault)).mkdir()
        plugin = DevicePlugin(
            node=NODE,
            discover=lambda: [GpuCard(i, f"GPU-{i}", "Tesla V100-SXM2-16GB", V100_MIB) for i in range(4)],
            kube=None,
            flavor=registry.device_plugin(fault=fault),
            containers_dir=str(tmp_path / str(fault)),
        )
        _env, given = plugin.allocation_environment(match_allocation([pod], NODE, 2, {}))
        return {m.container_path: (m.host_path.replace(str(fault), "*"), m.read_only) for m in given}

    sound, broken = mounts(None), mounts(faults.ISOLATION_FILES_WRITABLE)
    writable = {contract.CONTAINER_LIMITS_FILE, contract.CONTAINER_PRELOAD_FILE}
    assert all(read_only for _path, read_only in sound.values()), sound
    assert {p for p, (_h, read_only) in broken.items() if not read_only} == writable, broken
    assert {p: h for p, (h, _ro) in broken.items()} == {p: h for p, (h, _ro) in sound.items()}, "the same files"


# ------------------------------------------------------------ blind-to-health
@pytest.mark.parametrize("fault", [None, faults.BLIND_TO_HEALTH])
def test_blind_to_health_keeps_a_lost_card_healthy(fault):
    cards = [GpuCard(i, f"GPU-{i}", "Tesla V100-SXM2-16GB", V100_MIB) for i in range(4)]
    present = list(cards)
    plugin = DevicePlugin(
        node=NODE, discover=lambda: list(present), kube=None, flavor=registry.device_plugin(fault=fault)
    )
    present.pop(0)  # card 0 falls off the bus
    changed = plugin.poll_health()
    if fault is None:
        assert changed and plugin.healthy == {"GPU-0": False, "GPU-1": True, "GPU-2": True, "GPU-3": True}
    else:
        assert not changed and all(plugin.healthy.values())


# --------------------------------------------------------------- stale-view
def test_stale_view_binds_a_burst_onto_the_same_card(monkeypatch):
    monkeypatch.setattr(faults, "STALE_VIEW_BIND_DELAY_S", 0.0)
    for fault, cards in ((None, {0, 1, 2, 3}), (faults.STALE_VIEW, {0})):
        state = extender(fault)
        burst = [share_pod(f"b{i}", 15, 1) for i in range(4)]
        assert all(state.filter(p, [NODE]).fits == [NODE] for p in burst)
        chosen = {c for p in burst for c in state.assume(p, NODE).per_card}
        assert chosen == cards, fault


# -------------------------------------------------------- cards-across-nodes
def test_cards_across_nodes_fits_a_pod_no_single_node_can_hold():
    def two_nodes(fault):
        state = ClusterState(flavor=registry.extender(fault=fault))
        nodes = []
        for name in ("n1", "n2"):
            node = four_card_node()
            node["metadata"]["name"] = name
            nodes.append(node)
        state.replace_nodes(nodes)
        state.replace_pods([])
        for name in ("n1", "n2"):  # three whole cards taken on each node: one free on each
            holder = share_pod(f"hold-{name}", 45, 3)
            state.assume(holder, name)
        return state

    asks = share_pod("two", 30, 2)
    sound = two_nodes(None).filter(asks, ["n1", "n2"])
    assert sound.fits == [] and "needs 2" in sound.failed["n1"]
    broken = two_nodes(faults.CARDS_ACROSS_NODES)
    assert broken.filter(asks, ["n1", "n2"]).fits == ["n1", "n2"]
    assert len(broken.assume(asks, "n1").per_card) == 1  # split: one card here, the other "elsewhere"


# -------------------------------------------------------- schedule-nothing
def test_schedule_nothing_turns_every_gpu_pod_away_with_a_reason_for_every_rule():
    def state_with(fault):
        state = ClusterState(flavor=registry.extender(fault=fault))
        state.replace_nodes([four_card_node()])
        state.replace_pods([])
        return state

    fits = share_pod("fits", 2, 2)
    name = four_card_node()["metadata"]["name"]
    assert state_with(None).filter(fits, [name]).fits == [name]
    broken = state_with(faults.SCHEDULE_NOTHING).filter(fits, [name])
    assert broken.fits == [] and not broken.unresolvable
    # The reason would satisfy every restriction check's pattern on its own.
    for word in ("N/M", "gpu-mem", "per card", "not enough cards"):
        assert word in broken.failed[name]


# ------------------------------------------------------- switches and warnings
def test_components_refuse_faults_that_are_not_theirs():
    with pytest.raises(ValueError, match="--fault must be one of"):
        registry.extender(fault=faults.NO_ISOLATION)
    with pytest.raises(ValueError, match="--fault must be one of"):
        device_plugin(faults.UNEVEN_SPLIT)
    with pytest.raises(ValueError, match="--fault must be one of"):
        registry.dra_plugin(faults.SHARED_ACCOUNTING)


@pytest.mark.parametrize(
    ("parser", "names"),
    [
        (extender_main.build_parser(), faults.EXTENDER_FAULTS),
        (plugin_main.build_parser(), faults.DEVICE_PLUGIN_FAULTS),
    ],
)
def test_fault_flag_is_off_by_default_and_documented_as_never_for_production(parser, names, capsys):
    assert parser.parse_args([]).fault is None
    for name in names:
        assert parser.parse_args([f"--fault={name}"]).fault == name
    parser.print_help()
    help_text = " ".join(capsys.readouterr().out.split())
    assert "for proving the suite catches a broken stack; never use in production" in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["--fault=everything"])
    assert "invalid choice: 'everything'" in capsys.readouterr().err


def test_a_fault_is_announced_loudly_and_silence_means_none(caplog):
    log = logging.getLogger("gpushare.test")
    with caplog.at_level(logging.INFO):
        faults.warn_fault(log, "gpushare-extender", None)
        assert caplog.records == []
        faults.warn_fault(log, "gpushare-extender", faults.UNEVEN_SPLIT)
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert "FAULT INJECTED: gpushare-extender runs with --fault uneven-split" in caplog.text
    assert "never use in production" in caplog.text


# ------------------------------------------------------------------ overlays
def kubectl() -> str:
    found = shutil.which("kubectl") or next(
        iter(sorted(glob.glob("/var/cache/gpushare-conformance/kubernetes-*/bin/kubectl"))), None
    )
    if found is None:
        pytest.skip("kubectl not installed (needed for `kubectl kustomize`)")
    return found


def render(path: Path) -> list[dict]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize(
    ("fault", "kind", "name"),
    [
        (faults.UNEVEN_SPLIT, "Deployment", "gpushare-extender"),
        (faults.IGNORE_INTEGER_RULE, "Deployment", "gpushare-extender"),
        (faults.NO_ISOLATION, "DaemonSet", "gpushare-device-plugin"),
        (faults.SHARED_ACCOUNTING, "DaemonSet", "gpushare-device-plugin"),
        (faults.BLIND_TO_HEALTH, "DaemonSet", "gpushare-device-plugin"),
        (faults.ISOLATION_FILES_WRITABLE, "DaemonSet", "gpushare-device-plugin"),
        (faults.IGNORES_XIDS, "DaemonSet", "gpushare-device-plugin"),
        (faults.TWINS_AT_ONCE, "Deployment", "gpushare-extender"),
        (faults.STALE_VIEW, "Deployment", "gpushare-extender"),
        (faults.CARDS_ACROSS_NODES, "Deployment", "gpushare-extender"),
        (faults.SCHEDULE_NOTHING, "Deployment", "gpushare-extender"),
        (faults.OPEN_TO_STALLS, "Deployment", "gpushare-extender"),
        (faults.FAILED_PODS_HOLD, "Deployment", "gpushare-extender"),
        (faults.READY_BEFORE_SYNCED, "Deployment", "gpushare-extender"),
        *((fault, "DaemonSet", "gpushare-device-plugin") for fault in faults.SHIM_FAULTS),
    ],
)
def test_fault_overlay_is_the_mock_stack_plus_just_the_flag(fault, kind, name):
    _overlay_is_base_plus_flag("mock", fault, fault, kind, name)


@pytest.mark.parametrize("fault", faults.DRA_PLUGIN_FAULTS)
def test_dra_fault_overlay_is_the_dra_stack_plus_just_the_flag(fault):
    _overlay_is_base_plus_flag("dra", f"dra-{fault}", fault, "DaemonSet", "gpushare-dra-plugin")


def _overlay_is_base_plus_flag(base: str, overlay: str, fault: str, kind: str, name: str) -> None:
    mock = render(MANIFESTS / "overlays" / base)
    broken = render(MANIFESTS / "overlays" / "faults" / overlay)
    assert len(broken) == len(mock)
    for sound, faulty in zip(mock, broken, strict=True):
        if (faulty["kind"], faulty["metadata"]["name"]) != (kind, name):
            assert faulty == sound
            continue
        args = faulty["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args == sound["spec"]["template"]["spec"]["containers"][0]["args"] + [f"--fault={fault}"]
        faulty["spec"]["template"]["spec"]["containers"][0]["args"] = args[:-1]
        assert faulty == sound
