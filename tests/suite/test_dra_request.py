"""The seed's request spelled for DRA (gpushare_conformance/dra_request.py, docs/dra.md)."""

from __future__ import annotations

import pytest

from gpushare_conformance.dra_request import (
    DraRequestError,
    DraSpelling,
    claim_template,
    per_card_quantity,
    use_claim_template,
)

SPELLING = DraSpelling(
    device_class="gpu.gpushare.conformance.io", distinct_attribute="gpu.gpushare.conformance.io/uuid"
)


@pytest.mark.parametrize(
    ("total", "cards", "share"), [(8, 2, "4Gi"), (3, 2, "1536Mi"), (1, 3, "357913942"), (15, 1, "15Gi")]
)
def test_a_share_is_n_over_m_exactly_or_just_above(total, cards, share):
    assert per_card_quantity(total, cards) == share


@pytest.mark.parametrize(("total", "cards", "says"), [(0, 2, "total_gib"), (8, 0, "cards"), (True, 1, "total_gib")])
def test_what_cannot_be_asked_is_named(total, cards, says):
    with pytest.raises(DraRequestError, match=says):
        per_card_quantity(total, cards)


def test_the_seeds_8_gib_over_2_cards_is_two_one_device_requests_on_distinct_cards():
    template = claim_template("seed", 8, 2, SPELLING)
    assert (template["apiVersion"], template["kind"]) == ("resource.k8s.io/v1", "ResourceClaimTemplate")
    devices = template["spec"]["spec"]["devices"]
    assert devices["requests"] == [
        {
            "name": f"gpu-{i}",
            "exactly": {
                "deviceClassName": "gpu.gpushare.conformance.io",
                "allocationMode": "ExactCount",
                "count": 1,
                "capacity": {"requests": {"memory": "4Gi"}},
            },
        }
        for i in range(2)
    ]
    assert devices["constraints"] == [
        {"requests": ["gpu-0", "gpu-1"], "distinctAttribute": "gpu.gpushare.conformance.io/uuid"}
    ]


def test_one_card_needs_no_constraint():
    devices = claim_template("one", 2, None, SPELLING)["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["gpu-0"] and "constraints" not in devices


def test_the_pods_container_uses_the_claim():
    spec = {"containers": [{"name": "a"}, {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}
    use_claim_template(spec, "tmpl", container_index=1)
    use_claim_template(spec, "tmpl", container_index=1)  # again: still one reference
    assert spec["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "tmpl"}]
    assert spec["containers"][1]["resources"] == {"limits": {"cpu": "1"}, "claims": [{"name": "gpus"}]}
    assert "resources" not in spec["containers"][0]
    with pytest.raises(DraRequestError, match="no container 5"):
        use_claim_template(spec, "tmpl", container_index=5)
