"""Images from a registry without one: the registry names, their checks, the manifest
rewrite, `images push` (with a fake skopeo) and `--gpushare-image-registry`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpushare_conformance import cli, names
from gpushare_conformance.commands import run as run_command
from gpushare_conformance.fixtures.framework import deploy
from gpushare_conformance.fixtures.options import OptionError, SuiteOptions
from gpushare_conformance.images.oci import ImageConfig, layer_from_directory, write_archive
from gpushare_conformance.images.registry import (
    RegistryError,
    archive_refs,
    check_registry,
    push,
    registry_ref,
    rewrite_manifests,
)

STACK = "localhost/gpushare-conformance/stack:dev"


@pytest.mark.parametrize(
    "registry, expected",
    [
        ("registry.example.com:5000/team", "registry.example.com:5000/team/gpushare-conformance/stack:dev"),
        ("registry.example.com/", "registry.example.com/gpushare-conformance/stack:dev"),
        ("127.0.0.1:5000", "127.0.0.1:5000/gpushare-conformance/stack:dev"),
        ("[::1]:5000/a/b-c", "[::1]:5000/a/b-c/gpushare-conformance/stack:dev"),
        ("localhost", "localhost/gpushare-conformance/stack:dev"),
        (None, STACK),
    ],
)
def test_a_local_name_maps_to_its_registry_name(registry, expected):
    assert registry_ref(STACK, registry) == expected


def test_images_that_are_not_the_suites_keep_their_name():
    assert registry_ref(names.SEED_IMAGE, "r.example.com") == names.SEED_IMAGE
    assert registry_ref("busybox:1", "r.example.com") == "busybox:1"


@pytest.mark.parametrize(
    "value, message",
    [
        ("https://r.example.com", "has a scheme"),
        ("r.example.com/Team", "not a registry name"),
        ("r.example.com/team:dev", "not a registry name"),
        ("r.example.com:99999", "outside 1-65535"),
        ("team", "reads as a Docker Hub path"),
        ("", "not a registry name"),
        ("r .example.com", "not a registry name"),
    ],
)
def test_a_bad_registry_is_named_with_its_field(value, message):
    with pytest.raises(RegistryError, match=f"^--the-field: {value!r}.*{message}"):
        check_registry(value, "--the-field")


def test_the_rewrite_moves_only_the_suites_images_and_leaves_the_rest_byte_identical():
    text = (
        "spec:\n  containers:\n  - image: localhost/gpushare-conformance/stack:dev\n"
        "    imagePullPolicy: IfNotPresent\n  - name: x\n    image: 'localhost/gpushare-conformance/pause:3.10'\n"
        "  - image: busybox:1\n    args: [localhost/gpushare-conformance/stack:dev]\n"
    )
    moved = rewrite_manifests(text, "r.example.com:5000/team")
    assert moved == text.replace(
        "image: localhost/gpushare-conformance/stack:dev",
        "image: r.example.com:5000/team/gpushare-conformance/stack:dev",
    ).replace("'localhost/gpushare-conformance/pause", "'r.example.com:5000/team/gpushare-conformance/pause")
    assert "args: [localhost/gpushare-conformance/stack:dev]" in moved  # not an image field
    assert rewrite_manifests(text, None) is text


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl renders the overlays")
@pytest.mark.parametrize("overlay", [names.STACK_BASE, names.MOCK_OVERLAY, names.MOCK_WORKLOADS])
def test_every_image_of_the_rendered_manifests_comes_from_the_registry(overlay):
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(overlay)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    moved = rewrite_manifests(rendered, "r.example.com")
    images = [
        line.split("image:", 1)[1].strip()
        for line in moved.splitlines()
        if line.strip().startswith(("image:", "- image:"))
    ]
    assert images and all(i.startswith("r.example.com/gpushare-conformance/") for i in images), images
    assert moved.replace("r.example.com/", "localhost/") == rendered


class _Kube:
    """Records kubectl calls; `kustomize` answers a rendered stack."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def kubectl(self, *args: str, timeout: float = 120, input_text: str | None = None, check: bool = True) -> str:
        self.calls.append((args, input_text))
        return f"kind: DaemonSet\n      - image: {STACK}\n" if args[0] == "kustomize" else ""


def test_the_stack_is_applied_as_before_without_a_registry_and_rendered_with_one(tmp_path):
    kube = _Kube()
    deploy.apply_overlay(kube, tmp_path, None, 300)
    assert kube.calls == [(("apply", "-k", str(tmp_path)), None)]
    kube = _Kube()
    deploy.apply_overlay(kube, tmp_path, "r.example.com", 300)
    assert kube.calls == [
        (("kustomize", str(tmp_path)), None),
        (("apply", "-f", "-"), "kind: DaemonSet\n      - image: r.example.com/gpushare-conformance/stack:dev\n"),
    ]


def _archive(tmp_path: Path, refs: list[str]) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_text("x")
    layer = layer_from_directory(tree, tmp_path / "layer.tar")
    return write_archive([layer], ImageConfig(cmd=["/f"]), refs, tmp_path / "app.oci.tar")


def test_push_copies_every_name_of_an_archive_with_skopeo(tmp_path):
    archive = _archive(tmp_path, [STACK, names.MOCK_WORKLOAD_IMAGE])
    assert archive_refs(archive) == [STACK, names.MOCK_WORKLOAD_IMAGE]
    seen = []

    def skopeo(argv, **kwargs):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    pushed = push([archive], "r.example.com:5000/", tls_verify=False, progress=lambda m: None, run=skopeo)
    assert pushed == [
        "r.example.com:5000/gpushare-conformance/stack:dev",
        "r.example.com:5000/gpushare-conformance/tf-mnist-mock:dev",
    ]
    assert seen[0] == [
        "skopeo",
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        f"oci-archive:{archive}:{STACK}",
        "docker://r.example.com:5000/gpushare-conformance/stack:dev",
    ]


def test_a_failed_push_carries_skopeos_words(tmp_path):
    archive = _archive(tmp_path, [STACK])

    def skopeo(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "pinging container registry: connection refused\n")

    with pytest.raises(RegistryError, match=r"pushing .*stack:dev to r.example.com/.* \(skopeo exit 1\): pinging"):
        push([archive], "r.example.com", progress=lambda m: None, run=skopeo)


def test_the_push_command_checks_its_arguments(tmp_path, capsys):
    assert cli.main(["images", "push", "HTTP://x", "--out", str(tmp_path)]) == 2
    assert "REGISTRY: 'HTTP://x' has a scheme" in capsys.readouterr().err
    assert cli.main(["images", "push", "--out", str(tmp_path)]) == 2
    assert "images push needs REGISTRY" in capsys.readouterr().err
    assert cli.main(["images", "push", "r.example.com", "--out", str(tmp_path)]) == 1
    assert f"--out: no *.oci.tar in {tmp_path}" in capsys.readouterr().err
    assert cli.main(["images", "build", "r.example.com"]) == 2
    assert "REGISTRY r.example.com only applies to `images push`" in capsys.readouterr().err
    assert cli.main(["images", "push", "r.example.com", "--kind-node"]) == 2


def test_the_image_registry_option_names_every_image_the_suite_runs():
    options = SuiteOptions.from_values({"gpushare_cluster": "existing", "gpushare_image_registry": "r.example.com/"})
    assert options.image_registry == "r.example.com"
    assert options.image(names.SUITE_IMAGE) == "r.example.com/gpushare-conformance/tf-mnist-mock:dev"
    assert options.image(names.SEED_IMAGE) == names.SEED_IMAGE
    assert SuiteOptions.from_values({"gpushare_cluster": "existing"}).image(names.SUITE_IMAGE) == names.SUITE_IMAGE


@pytest.mark.parametrize(
    "values, message",
    [
        ({"gpushare_cluster": "local", "gpushare_image_registry": "r.example.com"}, "only applies to .*existing"),
        ({"gpushare_cluster": "existing", "gpushare_image_registry": "r.example.com/A"}, "not a registry name"),
    ],
)
def test_a_bad_image_registry_option_is_named(values, message):
    with pytest.raises(OptionError, match=f"--gpushare-image-registry.*{message}"):
        SuiteOptions.from_values(values)


def test_run_passes_the_registry_on_to_pytest():
    parser = cli.build_parser()
    argv = run_command.pytest_argv(
        parser.parse_args(["run", "--cluster", "existing", "--image-registry", "r.example.com"])
    )
    assert argv[argv.index("--gpushare-image-registry") + 1] == "r.example.com"
    assert "--gpushare-image-registry" not in run_command.pytest_argv(parser.parse_args(["run"]))
