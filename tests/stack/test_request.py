"""The stack's own reading of a pod's request."""

from __future__ import annotations

import pytest
from stack_objects import pod

from gpushare_stack.request import ShareRequestError, is_share_pod, share_request


def test_seed_request_is_two_cards_of_four_gib():
    request = share_request(pod("seed", 8, count=2))
    assert (request.count, request.total_gib, request.per_card_gib) == (2, 8, 4)


def test_missing_count_label_means_one_card():
    assert share_request(pod("single", 3)).count == 1


@pytest.mark.parametrize(
    "gib, count, message",
    [
        (
            8,
            3,
            "gpushare: N/M must be an integer: aliyun.com/gpu-mem=8, aliyun.com/gpu-count=3 gives 2.67 GiB per card",
        ),
        (8, 0, "gpushare: label aliyun.com/gpu-count must be >= 1, got '0'"),
    ],
)
def test_bad_requests_name_rule_and_values(gib, count, message):
    with pytest.raises(ShareRequestError) as info:
        share_request(pod("bad", gib, count=count))
    assert str(info.value) == message


def test_non_integer_values_are_refused_with_field_and_value():
    bad_label = pod("bad", 8)
    bad_label["metadata"]["labels"]["aliyun.com/gpu-count"] = "two"
    with pytest.raises(
        ShareRequestError, match=r"label aliyun.com/gpu-count must be a non-negative integer, got 'two'"
    ):
        share_request(bad_label)
    bad_limit = pod("bad", 8)
    bad_limit["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-mem"] = "8Gi"
    with pytest.raises(ShareRequestError, match=r"aliyun.com/gpu-mem of container 'c0'.*'8Gi'"):
        share_request(bad_limit)


def test_multi_container_pod_sums_containers_and_checks_each():
    request = share_request(pod("two", [4, 2], count=2))
    assert request.total_gib == 6 and request.per_card_gib == 3
    assert [request.container_per_card(c) for c in request.containers] == [2, 1]
    with pytest.raises(ShareRequestError, match=r"container 'c1'"):
        share_request(pod("odd", [4, 3], count=2))


def test_pod_without_gpu_mem_is_not_a_share_pod():
    plain = pod("plain", 1)
    plain["spec"]["containers"][0]["resources"] = {}
    assert not is_share_pod(plain)
    with pytest.raises(ShareRequestError, match="requests no aliyun.com/gpu-mem"):
        share_request(plain)
