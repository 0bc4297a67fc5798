"""`cluster down` takes back what its cluster made and nothing else.

Another cluster or kubelet on the host owns chains named KUBE-*/CNI-*, network
namespaces named cni-* and mounts under the kubelet's root. This puts such things on the
host (a chain and a netns and a mount before `up`, a CNI chain of another network after
it), brings the local cluster down and up and down again, and finds every foreign thing
as it was, while the cluster's own chains, bridge and mounts are gone. The cluster is
brought up again at the end for the checks that follow.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushare_conformance.fixtures.providers.local import cluster as local

pytestmark = [pytest.mark.e2e, pytest.mark.disruptive]

FOREIGN_CHAIN = "KUBE-FOREIGN-GSTEST"  # a KUBE-* chain of another kubelet, there before `up`
FOREIGN_CNI_CHAIN = "CNI-foreign-gstest"  # a chain of another CNI network, made while we run
FOREIGN_NETNS = "cni-foreign-gstest"
FOREIGN_MOUNT = local.KUBELET_ROOT / "plugins" / "foreign-gstest"  # e.g. another CSI driver's
MARK = "written by another kubelet\n"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def chain_rules(table: str, chain: str) -> list[str]:
    listed = sh("iptables", "-t", table, "-S", chain, check=False)
    return listed.stdout.splitlines() if listed.returncode == 0 else []


def jumps_to(table: str, builtin: str, chain: str) -> bool:
    return any(line.endswith(f"-j {chain}") for line in chain_rules(table, builtin))


def is_mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def remove_foreign() -> None:
    sh("iptables", "-t", "filter", "-D", "FORWARD", "-j", FOREIGN_CHAIN, check=False)
    for table, chain in (("filter", FOREIGN_CHAIN), ("nat", FOREIGN_CNI_CHAIN)):
        sh("iptables", "-t", table, "-F", chain, check=False)
        sh("iptables", "-t", table, "-X", chain, check=False)
    sh("ip", "netns", "delete", FOREIGN_NETNS, check=False)
    if is_mounted(FOREIGN_MOUNT):
        sh("umount", str(FOREIGN_MOUNT), check=False)
    if FOREIGN_MOUNT.is_dir():
        FOREIGN_MOUNT.rmdir()


@pytest.fixture
def provider(cluster) -> Iterator[local.LocalProvider]:
    if cluster.provider != "local":
        pytest.skip("this takes the local provider's cluster down and up")
    provider = local.LocalProvider(state_dir=cluster.details["state_dir"])
    try:
        yield provider
    finally:
        remove_foreign()
        provider.up()  # the checks after this one need the cluster


def test_down_leaves_another_clusters_chain_netns_and_mount(provider, capsys):
    provider.down()
    remove_foreign()
    # Another cluster's things, there before ours starts ...
    sh("iptables", "-t", "filter", "-N", FOREIGN_CHAIN)
    sh("iptables", "-t", "filter", "-A", FOREIGN_CHAIN, "-j", "RETURN")
    sh("iptables", "-t", "filter", "-A", "FORWARD", "-j", FOREIGN_CHAIN)
    sh("ip", "netns", "add", FOREIGN_NETNS)
    FOREIGN_MOUNT.mkdir(parents=True, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", "size=1m", "foreign-gstest", str(FOREIGN_MOUNT))
    (FOREIGN_MOUNT / "socket-of-another-driver").write_text(MARK)

    provider.up()
    assert chain_rules("nat", "KUBE-SERVICES"), "the cluster's kube-proxy made no KUBE-SERVICES chain"
    # ... and one made while ours runs: its CNI comment names another network.
    sh("iptables", "-t", "nat", "-N", FOREIGN_CNI_CHAIN)
    comment = 'name: "other-net" id: "0123abcd"'
    sh("iptables", "-t", "nat", "-A", FOREIGN_CNI_CHAIN, "-m", "comment", "--comment", comment, "-j", "RETURN")
    capsys.readouterr()
    left = provider.down()
    said = capsys.readouterr().out

    assert left == [], said
    assert chain_rules("filter", FOREIGN_CHAIN) == [f"-N {FOREIGN_CHAIN}", f"-A {FOREIGN_CHAIN} -j RETURN"]
    assert jumps_to("filter", "FORWARD", FOREIGN_CHAIN), "the jump to the foreign chain was removed"
    assert len(chain_rules("nat", FOREIGN_CNI_CHAIN)) == 2, "the other network's CNI chain was removed"
    assert FOREIGN_NETNS in sh("ip", "netns", "list").stdout
    assert is_mounted(FOREIGN_MOUNT), "the foreign mount under the kubelet's root was unmounted"
    assert (FOREIGN_MOUNT / "socket-of-another-driver").read_text() == MARK
    # while what the cluster made is gone
    assert chain_rules("nat", "KUBE-SERVICES") == []
    assert sh("ip", "link", "show", local.BRIDGE, check=False).returncode != 0
    assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(local.RUN_DIR) in line]
