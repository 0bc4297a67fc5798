"""Extender filter and bind latency with a large informer cache.

1,000 nodes x 8 cards and 10,000 bound pods in the cache; the scheduler's
nodeCacheCapable form (NodeNames only) posted over HTTP to the real server.
Target: p99 filter < 10 ms. Bind is measured at the state layer (card choice,
reservation, annotations): its API round-trips depend on the API server, not on us.

Run: python benchmarks/extender_latency.py [--nodes 1000 --cards 8 --pods 10000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from gpushare_stack import contract
from gpushare_stack.allocation import bind_annotations
from gpushare_stack.extender.server import ExtenderServer
from gpushare_stack.extender.state import BindError, ClusterState


def make_node(name: str, cards: int, gib: int) -> dict:
    entries = [{"index": i, "uuid": f"GPU-{name}-{i}", "memory_mib": gib * 1024 + 800,
                "memory_gib": gib, "healthy": True} for i in range(cards)]
    return {"metadata": {"name": name, "annotations": {contract.NODE_CARDS_ANNOTATION: json.dumps(entries)}},
            "status": {"capacity": {contract.RESOURCE_MEM: str(cards * gib), contract.RESOURCE_COUNT: str(cards)}}}


def make_pod(name: str, gib: int, count: int) -> dict:
    return {"metadata": {"name": name, "namespace": "bench", "uid": str(uuid.uuid4()),
                         "labels": {contract.LABEL_COUNT: str(count)}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {contract.RESOURCE_MEM: str(gib)}}}]},
            "status": {"phase": "Pending"}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the cache (default: %(default)s)")
    parser.add_argument("--cards", type=int, default=8, help="cards per node (default: %(default)s)")
    parser.add_argument("--card-gib", type=int, default=15, help="GiB per card (default: %(default)s)")
    parser.add_argument("--pods", type=int, default=10000, help="bound pods in the cache (default: %(default)s)")
    parser.add_argument("--filters", type=int, default=300, help="filter requests (default: %(default)s)")
    parser.add_argument("--binds", type=int, default=5000, help="binds (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent binders (default: %(default)s)")
    args = parser.parse_args()
    rng = random.Random(7)

    state = ClusterState()
    names = [f"node-{i:04d}" for i in range(args.nodes)]
    state.replace_nodes(make_node(n, args.cards, args.card_gib) for n in names)
    t0 = time.perf_counter()
    bound = []

    def place(p: dict, first: int) -> None:
        for k in range(len(names)):
            node = names[(first + k) % len(names)]
            try:
                alloc = state.assume(p, node)
            except BindError:
                continue
            p["metadata"]["annotations"] = bind_annotations(alloc)
            p["spec"]["nodeName"] = node
            bound.append(p)
            return
        raise SystemExit("cluster full while seeding; lower --pods")

    # A third of the nodes nearly full (13 GiB used on every card), so the filter also
    # reports failures; the rest of the pods spread over the cluster.
    for n, node in enumerate(names[::3]):
        for c in range(args.cards):
            place(make_pod(f"hog-{n}-{c}", args.card_gib - 2, 1), n * 3)
    for i in range(args.pods - len(bound)):
        place(make_pod(f"seeded-{i}", 2, rng.choice([1, 2])), i)
    rebuilt = ClusterState()
    rebuilt.replace_nodes(make_node(n, args.cards, args.card_gib) for n in names)
    t1 = time.perf_counter()
    rebuilt.replace_pods(bound)
    rebuild_s = time.perf_counter() - t1
    rebuilt.synced.set()
    print(f"cache: {args.nodes} nodes x {args.cards} cards, {len(bound)} pods "
          f"(seeded in {t1 - t0:.2f}s, rebuilt from annotations in {rebuild_s * 1000:.0f} ms)")

    server = ExtenderServer(("127.0.0.1", 0), rebuilt, binder=None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1])

    def filter_series(cold: bool) -> tuple[list[float], int]:
        latencies, fits = [], 0
        for i in range(args.filters):
            if cold:  # forget reasons worked out earlier, as after a change on every node
                with rebuilt._lock:
                    rebuilt._misfits.clear()
            body = json.dumps({"Pod": make_pod(f"f{i}", 8, 2), "Nodes": None, "NodeNames": names}).encode()
            start = time.perf_counter()
            conn.request("POST", f"{contract.EXTENDER_PREFIX}/filter", body=body,
                         headers={"Content-Type": "application/json"})
            result = json.loads(conn.getresponse().read())
            latencies.append((time.perf_counter() - start) * 1000)
            fits = len(result["NodeNames"])
        return latencies, fits

    for cold in (False, True):
        latencies, fits = filter_series(cold)
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        print(f"filter (HTTP, NodeNames={args.nodes}, {'cold reasons' if cold else 'warm'}): "
              f"p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({fits} of {args.nodes} nodes fit)  "
              f"target p99 < 10 ms: {'met' if p99 < 10 else 'MISSED'}")
    server.shutdown()

    bind_lat: list[float] = []
    lock = threading.Lock()

    def bind(i: int) -> bool:
        p = make_pod(f"b{i}", rng.choice([2, 4, 8]), rng.choice([1, 2]))
        start = time.perf_counter()
        try:
            alloc = rebuilt.assume(p, names[i % len(names)])
            bind_annotations(alloc)
            ok = True
        except BindError:
            ok = False
        with lock:
            bind_lat.append((time.perf_counter() - start) * 1000)
        return ok

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        placed = sum(pool.map(bind, range(args.binds)))
    elapsed = time.perf_counter() - start
    print(f"bind (state layer, {args.threads} threads): p50 {statistics.median(bind_lat):.3f} ms  "
          f"p99 {percentile(bind_lat, 0.99):.3f} ms  {args.binds / elapsed:.0f} binds/s  "
          f"({placed} placed, {args.binds - placed} refused: node full)")


if __name__ == "__main__":
    main()
