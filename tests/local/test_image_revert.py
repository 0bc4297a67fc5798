"""The cluster runs the tree's images whatever the history: build A, build B, back to A.

Containerd keeps A's manifest after B is imported under the same tag, so "the manifest
is in the store" is no reason to skip an import; the tag must point at the build. The
images here are tiny and carry a name of their own, so the stack is not disturbed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_conformance.images.oci import ImageConfig, import_archives, layer_from_directory, write_archive

REF = "localhost/gpushare-conformance/revert-check:dev"


def _image(tmp_path: Path, content: str) -> Path:
    tree = tmp_path / f"tree-{content}"
    tree.mkdir()
    (tree / "version.txt").write_text(content)
    layer = layer_from_directory(tree, tmp_path / f"layer-{content}.tar")
    return write_archive([layer], ImageConfig(cmd=["/version.txt"]), [REF], tmp_path / f"image-{content}.tar")


def test_build_a_then_b_then_a_again_leaves_the_tag_on_a(cluster, tmp_path):
    if cluster.provider != "local":
        pytest.skip("imports into the local provider's containerd")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    socket = LocalProvider(state_dir=cluster.details["state_dir"]).paths.containerd_socket
    assert socket.exists(), f"no containerd socket at {socket}"
    ctr = ["ctr", "--address", str(socket), "-n", "k8s.io"]
    a, b = _image(tmp_path, "A"), _image(tmp_path, "B")
    digest_a = "sha256:" + a.with_name(a.name + ".manifest").read_text()
    digest_b = "sha256:" + b.with_name(b.name + ".manifest").read_text()
    assert digest_a != digest_b
    assert import_archives(ctr, [a], print)[REF] == digest_a
    assert import_archives(ctr, [b], print)[REF] == digest_b
    assert import_archives(ctr, [a], print)[REF] == digest_a, "back to A: the tag still names B's build"


def test_the_running_stack_is_the_recorded_build(cluster, kube):
    """The report's stack image digest is what the stack pods run."""
    if cluster.provider != "local":
        pytest.skip("the local provider records the stack digest it imported")
    from gpushare_conformance.fixtures.providers.local import LocalProvider
    from gpushare_conformance.images.oci import ctr_image_digests

    digest = cluster.details.get("stack_image", "unknown")
    assert digest.startswith("sha256:"), cluster.details
    socket = LocalProvider(state_dir=cluster.details["state_dir"]).paths.containerd_socket
    tagged = ctr_image_digests(["ctr", "--address", str(socket), "-n", "k8s.io"])
    assert tagged.get("localhost/gpushare-conformance/stack:dev") == digest, "the tag is not on the recorded build"
    pods = kube.to_dict(kube.core.list_namespaced_pod("gpushare-system")).get("items") or []
    assert pods, "no stack pods"
    for pod in pods:
        for status in pod["status"].get("containerStatuses") or []:
            assert status.get("image", "").startswith("localhost/gpushare-conformance/stack"), status
