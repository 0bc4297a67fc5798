"""``gpushare-device-plugin``: run the device plugin on this node."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from gpushare_stack import contract, kubeclient, variants
from gpushare_stack.deviceplugin.discovery import DiscoveryError, discover
from gpushare_stack.deviceplugin.environment import DEVICE_LIST_STRATEGIES, DEVICE_MOUNTS_ROOT, ENVVAR, VOLUME_MOUNTS
from gpushare_stack.deviceplugin.kube import KubeAccess
from gpushare_stack.deviceplugin.plugin import DevicePlugin


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpushare-device-plugin",
        description="Kubelet device plugin advertising aliyun.com/gpu-mem (one device per GiB per "
        "card) and aliyun.com/gpu-count (one per card); Allocate gives a container the "
        "cards and per-card limits the gpushare extender chose. --flavor makes it behave like "
        "another GPU-sharing stack's device plugin instead.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kubeclient.version()}")
    variants.add_flavor_option(parser, variants.DEVICE_PLUGIN)
    parser.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME"), help="this node's name (default: env NODE_NAME)"
    )
    parser.add_argument(
        "--kubelet-socket-dir",
        default=contract.DEVICE_PLUGIN_DIR,
        help="directory of kubelet.sock and the plugin sockets (default: %(default)s)",
    )
    parser.add_argument(
        "--native-host-dir",
        default=contract.HOST_NATIVE_DIR,
        help="host directory holding the shim, mounted into containers at "
        f"{contract.CONTAINER_NATIVE_DIR} (default: %(default)s)",
    )
    parser.add_argument(
        "--containers-dir",
        default=contract.HOST_CONTAINERS_DIR,
        help="node directory where each container's limits and ld.so.preload files are written, "
        f"mounted read-only at {contract.CONTAINER_LIMITS_FILE} and {contract.CONTAINER_PRELOAD_FILE} "
        "so the workload cannot unset or raise its limits; the plugin must see it at the same path "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--device-list-strategy",
        choices=DEVICE_LIST_STRATEGIES,
        default=ENVVAR,
        help="how a container's cards reach the node's container toolkit: in NVIDIA_VISIBLE_DEVICES "
        f"only ({ENVVAR}), or also as mounts under {DEVICE_MOUNTS_ROOT} ({VOLUME_MOUNTS}), for a toolkit "
        "set to ignore an unprivileged container's own NVIDIA_VISIBLE_DEVICES, which closes cards to "
        "pods that asked none (default: %(default)s)",
    )
    parser.add_argument(
        "--health-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often NVML is polled for cards that disappeared (default: %(default)s)",
    )
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file; default: the in-cluster service account")
    variants.add_fault_option(parser, variants.DEVICE_PLUGIN)
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="(default: %(default)s)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kubeclient.require_node_name(parser, args.node_name)
    kubeclient.require_positive_seconds(parser, "--health-interval", args.health_interval)
    try:
        flavor = variants.load(variants.DEVICE_PLUGIN, args.flavor, args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    variants.warn_fault(logging.getLogger(__name__), variants.DEVICE_PLUGIN, args.fault)
    api = kubeclient.load_or_exit(parser, args.kubeconfig)
    try:
        plugin = DevicePlugin(
            node=args.node_name,
            discover=discover,
            kube=KubeAccess(api),
            socket_dir=args.kubelet_socket_dir,
            native_host_dir=args.native_host_dir,
            containers_dir=args.containers_dir,
            health_interval_s=args.health_interval,
            flavor=flavor,
            device_list_strategy=args.device_list_strategy,
        )
    except DiscoveryError as exc:
        print(exc, file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: plugin.stop())
    plugin.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
