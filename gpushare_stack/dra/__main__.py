"""``gpushare-dra-plugin``: the reference DRA driver's node component (docs/dra.md)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from gpushare_stack import contract, kubeclient, variants
from gpushare_stack.deviceplugin.discovery import DiscoveryError, discover
from gpushare_stack.deviceplugin.xids import XidWatcher
from gpushare_stack.dra import kubelet_plugin
from gpushare_stack.dra.edits import DRA_DIR, Preparer
from gpushare_stack.dra.kube import DraKubeAccess
from gpushare_stack.dra.policy import ReferenceDraDriver
from gpushare_stack.dra.publisher import SlicePublisher
from gpushare_stack.dra.slices import DRIVER

log = logging.getLogger("gpushare_stack.dra")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpushare-dra-plugin",
        description="Kubelet DRA plugin publishing each card of the node as a device whose memory claims "
        "consume in GiB steps (resource.k8s.io/v1, consumable capacity), and preparing a pod's claims with "
        "the same per-card limits and isolation shim as gpushare-device-plugin.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kubeclient.version()}")
    parser.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME"), help="this node's name (default: env NODE_NAME)"
    )
    parser.add_argument(
        "--driver", default=DRIVER, help="the driver's name in slices and claims (default: %(default)s)"
    )
    parser.add_argument(
        "--registry-dir",
        default=kubelet_plugin.REGISTRY_DIR,
        help="the kubelet's plugin registration directory (default: %(default)s)",
    )
    parser.add_argument(
        "--plugins-dir",
        default=kubelet_plugin.PLUGINS_DIR,
        help="where the DRA service socket goes, as <dir>/<driver>/dra.sock (default: %(default)s)",
    )
    parser.add_argument(
        "--native-host-dir",
        default=contract.HOST_NATIVE_DIR,
        help=f"host directory holding the shim, mounted at {contract.CONTAINER_NATIVE_DIR} (default: %(default)s)",
    )
    parser.add_argument(
        "--containers-dir",
        default=contract.HOST_CONTAINERS_DIR,
        help="node directory for each container's limits, preload and accounting files (default: %(default)s)",
    )
    parser.add_argument(
        "--dra-dir",
        default=DRA_DIR,
        help="node directory for each container's edits, read by the node's container toolkit (default: %(default)s)",
    )
    parser.add_argument(
        "--publish-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often the node's slice is checked against its cards (default: %(default)s)",
    )
    variants.add_fault_option(parser, variants.DRA_PLUGIN)
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file; default: the in-cluster service account")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="(default: %(default)s)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kubeclient.require_node_name(parser, args.node_name)
    kubeclient.require_positive_seconds(parser, "--publish-interval", args.publish_interval)
    api = DraKubeAccess(kubeclient.load_or_exit(parser, args.kubeconfig))
    try:
        cards = discover()
    except DiscoveryError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        policy = variants.load(variants.DRA_PLUGIN, fault=args.fault) or ReferenceDraDriver()
    except ValueError as exc:
        parser.error(str(exc))
    variants.warn_fault(log, variants.DRA_PLUGIN, args.fault)
    preparer = Preparer(
        api,
        discover,
        args.native_host_dir,
        args.containers_dir,
        args.dra_dir,
        isolation=policy.isolation,
    )
    plugin = kubelet_plugin.DraPlugin(
        args.node_name,
        api,
        args.driver,
        on_prepared=lambda claim, shares: preparer.prepare(claim, policy.sized_shares(claim, shares)),
        on_unprepared=preparer.unprepare,
    )
    server, _ = kubelet_plugin.serve(plugin, args.registry_dir, args.plugins_dir)
    publisher = SlicePublisher(api.resource, args.node_name, args.driver, capacity_gib=policy.capacity_gib())
    stop, news = threading.Event(), threading.Event()
    sick: dict[str, int] = {}  # card UUID -> the critical Xid that took it out of the pool

    def on_xid(uuid: str, xid: int) -> None:
        if not policy.critical_xid(xid):
            log.info("card %s: Xid %d, an application error; the card stays", uuid, xid)
            return
        log.warning("card %s: critical Xid %d; it leaves the pool until restart", uuid, xid)
        sick.setdefault(uuid, xid)
        news.set()

    def on_term(*_: object) -> None:
        stop.set()
        news.set()

    signal.signal(signal.SIGTERM, on_term)
    XidWatcher([c.uuid for c in cards], on_xid).start()
    log.info("serving DRA driver %s on node %s (%d cards)", args.driver, args.node_name, len(cards))
    while not stop.is_set():
        try:
            publisher.publish([c for c in discover() if c.uuid not in sick])
        except Exception as exc:  # the API or NVML briefly away: try again next round
            log.warning("publishing the node's slice failed: %s", exc)
        news.wait(args.publish_interval)
        news.clear()
    server.stop(grace=5).wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
