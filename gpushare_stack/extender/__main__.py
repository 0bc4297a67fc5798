"""``gpushare-extender``: run the scheduler extender."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import ssl

from gpushare_stack import contract, kubeclient, variants
from gpushare_stack.extender import selection
from gpushare_stack.extender.binder import Binder
from gpushare_stack.extender.informer import Informer
from gpushare_stack.extender.policy import ReferenceExtender
from gpushare_stack.extender.server import DEADLINE_S, LOOPBACK, MAX_CONNECTIONS, ExtenderServer, limit_connections
from gpushare_stack.extender.state import ClusterState
from gpushare_stack.extender.tls import TlsConfigError, server_context


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpushare-extender",
        description="kube-scheduler extender that places pods asking aliyun.com/gpu-mem=N with "
        "label aliyun.com/gpu-count=M on M cards of one node, N/M GiB each; --flavor makes it "
        "behave like another GPU-sharing stack's scheduler instead.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kubeclient.version()}")
    variants.add_flavor_option(parser, variants.EXTENDER)
    parser.add_argument("--address", default="0.0.0.0", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=contract.EXTENDER_PORT, help="TCP port (default: %(default)s)")
    parser.add_argument(
        "--health-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve GET /healthz, and GET inspect to --trusted-clients, in plain HTTP on --address:PORT "
        "(no verb): for the kubelet's probes when --tls-cert-file makes the main port refuse clients without a "
        "certificate (default: none)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help="connections open at once, at most (the process's file limit is set to N and a few more; a "
        "connection costs about 30 KiB in plain HTTP, 320 KiB in a TLS handshake): more wait in the "
        "listen backlog (default: %(default)s)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE_S,
        metavar="SECONDS",
        help="time a client has for a TLS handshake, a request head, a body; and how long an idle connection is "
        "kept (default: %(default)s)",
    )
    parser.add_argument(
        "--prefix",
        default=None,
        help=f"URL prefix of the verbs (default: {contract.EXTENDER_PREFIX}; a flavor's own prefix with --flavor)",
    )
    parser.add_argument(
        "--policy",
        choices=selection.POLICIES,
        default=os.environ.get("GPUSHARE_POLICY", selection.BINPACK),
        help="card placement: binpack fills cards up, spread uses the emptiest "
        "(default: env GPUSHARE_POLICY or %(default)s)",
    )
    parser.add_argument(
        "--trusted-clients",
        default=",".join(LOOPBACK),
        metavar="CIDRS",
        help="comma list of networks whose POSTs (filter, prioritize, bind) are served; the rest get "
        "403, so a pod cannot call /bind itself. The scheduler's extender configuration must "
        "reach the extender from one of them (default: %(default)s, for urlPrefix http://127.0.0.1:...)",
    )
    parser.add_argument(
        "--tls-cert-file",
        default=None,
        metavar="FILE",
        help="PEM serving certificate: serve HTTPS, and serve the verbs only to a client whose certificate "
        "--client-ca-file signed (kube-scheduler's extender tlsConfig). Without it the extender serves "
        "plain HTTP, where only --trusted-clients guards the verbs",
    )
    parser.add_argument(
        "--tls-private-key-file", default=None, metavar="FILE", help="PEM key of --tls-cert-file (required with it)"
    )
    parser.add_argument(
        "--client-ca-file",
        default=None,
        metavar="FILE",
        help="PEM CA that signs the scheduler's client certificate (required with --tls-cert-file)",
    )
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file; default: the in-cluster service account")
    parser.add_argument(
        "--watch-timeout", type=int, default=300, help="seconds before a watch is re-opened (default: %(default)s)"
    )
    variants.add_fault_option(parser, variants.EXTENDER)
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="(default: %(default)s)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    trusted = [c.strip() for c in args.trusted_clients.split(",") if c.strip()]
    for cidr in trusted:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            parser.error(f"--trusted-clients: {cidr!r} is not a network (e.g. 127.0.0.0/8, 10.0.0.5/32)")
    if not trusted:
        parser.error("--trusted-clients: give at least one network (the scheduler must reach the extender)")
    if not 16 <= args.max_connections <= 65536:
        parser.error(f"--max-connections: {args.max_connections} is not in [16, 65536]")
    if not 0 < args.deadline <= 300:
        parser.error(f"--deadline: {args.deadline:g} is not a number of seconds in (0, 300]")
    for option, port in (("--port", args.port), ("--health-port", args.health_port)):
        if port is not None and not 0 <= port <= 65535:
            parser.error(f"{option}: {port} is not a TCP port (0-65535)")
    tls_context = _tls_context(parser, args)
    try:
        flavor = variants.load(variants.EXTENDER, args.flavor, args.fault) or ReferenceExtender()
    except ValueError as exc:
        parser.error(str(exc))
    args.address, args.deadline, args.max_connections = flavor.listening(
        args.address, args.deadline, args.max_connections
    )
    try:
        limit_connections(args.max_connections)
    except (ValueError, OSError) as exc:
        parser.error(f"--max-connections: {args.max_connections}: cannot set the file limit: {exc}")
    variants.warn_fault(logging.getLogger(__name__), variants.EXTENDER, args.fault)
    prefix = args.prefix if args.prefix is not None else flavor.default_prefix
    state = ClusterState(policy=args.policy, flavor=flavor)
    api = kubeclient.load_or_exit(parser, args.kubeconfig)
    Informer(state, api, watch_timeout_s=args.watch_timeout).start()
    server = ExtenderServer(
        (args.address, args.port),
        state,
        Binder(state, api),
        prefix=prefix,
        trusted_clients=trusted,
        deadline_s=args.deadline,
        tls=tls_context,
        health_address=(args.address, args.health_port) if args.health_port is not None else None,
    )
    how = "HTTPS to the client CA's certificates only" if tls_context else "plain HTTP"
    if args.health_port is not None:
        how += f"; /healthz in plain HTTP on port {args.health_port}"
    logging.getLogger(__name__).info("%s", flavor.serving_line(args.address, args.port, prefix, how, args.policy))
    flavor.started(api)
    # As PID 1 of its container the process ignores SIGTERM unless it handles it, and
    # the kubelet would wait out the whole grace period before killing it.
    signal.signal(signal.SIGTERM, lambda signum, frame: server.stop_soon())
    signal.signal(signal.SIGINT, lambda signum, frame: server.stop_soon())
    try:
        server.serve_forever()
    finally:
        logging.getLogger(__name__).info("shutting down")
        server.server_close()
    return 0


def _tls_context(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ssl.SSLContext | None:
    """The server's TLS context from the three TLS options (all or none), or None."""
    given = {
        "--tls-cert-file": args.tls_cert_file,
        "--tls-private-key-file": args.tls_private_key_file,
        "--client-ca-file": args.client_ca_file,
    }
    if not any(given.values()):
        return None
    missing = [option for option, value in given.items() if not value]
    if missing:
        parser.error(f"{', '.join(missing)}: required with {', '.join(o for o, v in given.items() if v)}")
    try:
        return server_context(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    except TlsConfigError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    raise SystemExit(main())
