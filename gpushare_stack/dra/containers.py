"""Which container of a pod gets which shares of a claim.

A pod names its claims in ``spec.resourceClaims`` (a claim made from a template gets
its real name in ``status.resourceClaimStatuses``), and each container lists the claims
it uses in ``resources.claims``: a whole claim, or one request of it. A container sees
its shares' cards in the order of the claim's results (the order the requests are
written in the claim), with each card's limit the share's GiB, exactly as the device
plugin's Allocate hands cards and limits to a container.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpushare_stack.dra.shares import ClaimError, Share


def pod_claim_names(pod: Mapping[str, Any], claim_name: str) -> set[str]:
    """The names the pod uses for the ResourceClaim ``claim_name`` (its own, or made
    from a template and recorded in the pod's status)."""
    names = {
        c.get("name")
        for c in (pod.get("spec") or {}).get("resourceClaims") or []
        if c.get("resourceClaimName") == claim_name
    }
    names |= {
        s.get("name")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("resourceClaimName") == claim_name
    }
    return {n for n in names if n}


def container_shares(pod: Mapping[str, Any], claim_name: str, shares: Sequence[Share]) -> dict[str, list[Share]]:
    """Container name -> the shares of the claim it uses (containers using none are left out)."""
    meta = pod.get("metadata") or {}
    names = pod_claim_names(pod, claim_name)
    if not names:
        raise ClaimError(
            f"pod {meta.get('namespace')}/{meta.get('name')} does not name claim {claim_name} "
            "in spec.resourceClaims or status.resourceClaimStatuses"
        )
    by_request = {s.request: s for s in shares}
    out: dict[str, list[Share]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        used: list[Share] = []
        for ref in (container.get("resources") or {}).get("claims") or []:
            if ref.get("name") not in names:
                continue
            request = ref.get("request")
            if not request:
                used = list(shares)
                break
            if request not in by_request:
                raise ClaimError(
                    f"container {container.get('name')} uses request {request!r} of claim {claim_name}, "
                    f"which has no share of this driver here (requests: {', '.join(by_request) or 'none'})"
                )
            used.append(by_request[request])
        if used:
            order = {s.request: i for i, s in enumerate(shares)}
            out[str(container.get("name"))] = sorted(dict.fromkeys(used), key=lambda s: order[s.request])
    holders: dict[str, list[str]] = {}
    for container, used in out.items():
        for share in used:
            holders.setdefault(share.request, []).append(container)
    shared = {request: names_ for request, names_ in holders.items() if len(names_) > 1}
    if shared:
        request, names_ = next(iter(shared.items()))
        # Each container would get the whole share with its own budget: N containers, N times it.
        pod_name = f"{meta.get('namespace')}/{meta.get('name')}"
        raise ClaimError(
            f"the share of request {request!r} of claim {claim_name} is used by containers {', '.join(names_)} "
            f"of pod {pod_name}: a share serves one container (its budget cannot be split)"
        )
    return out
