"""Regenerate the kubelet gRPC stubs from the kubelet's own ``.proto`` files.

The wire format must be the kubelet's, so the stubs are generated from the upstream
files of ``k8s.io/kubelet``, never written by hand (``APIS``):

- ``deviceplugin``: ``pkg/apis/deviceplugin/v1beta1/api.proto`` -> ``gpushare_stack/api/api.proto``;
- ``dra``: ``pkg/apis/dra/v1/api.proto`` (the DRA kubelet plugin service kubelet 1.34
  calls, ``v1.DRAPlugin``) -> ``gpushare_stack/api/dra/dra.proto``;
- ``pluginregistration``: ``pkg/apis/pluginregistration/v1/api.proto`` (how a DRA
  plugin registers with the kubelet's plugin watcher) ->
  ``gpushare_stack/api/pluginregistration/registration.proto``.

Each upstream file is copied with exactly these edits, none of which changes a
message, field number or service:

1. ``import "github.com/gogo/protobuf/gogoproto/gogo.proto";`` lines are removed
   (gogoproto is a Go code-generation plugin; protoc for Python cannot resolve it).
2. File-level ``option (gogoproto.<name>) = <value>;`` lines are removed.
3. Field-level gogoproto options, ``[(gogoproto.<name>) = <value>, ...]``, are removed
   from field declarations (other field options are kept).

The device plugin API of v0.34.x no longer uses gogoproto (its copy is byte-identical
to upstream apart from the header comment this script adds); the DRA API still does.

Run: ``python -m gpushare_stack.api.generate [--api NAME] [--source PATH]`` (needs
grpcio-tools, the ``dev`` extra). ``tests/stack/test_api_generation.py`` checks that
the committed files equal a fresh generation.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

KUBELET_VERSION = "v0.37.2"
KUBELET_MODULE = Path(f"/root/go/pkg/mod/k8s.io/kubelet@{KUBELET_VERSION}")
API_DIR = Path(__file__).resolve().parent
REPO_ROOT = API_DIR.parent.parent


@dataclass(frozen=True)
class Api:
    """One kubelet API: where its proto is upstream, and the package its copy and stubs go to."""

    upstream: str  # path inside k8s.io/kubelet
    package: str  # dotted Python package holding the copy and the stubs
    proto: str  # the copy's file name; the stubs are <stem>_pb2.py, <stem>_pb2_grpc.py

    @property
    def source(self) -> Path:
        """The upstream file in the Go module cache (there once Kubernetes was built)."""
        return KUBELET_MODULE / self.upstream

    @property
    def directory(self) -> Path:
        return REPO_ROOT.joinpath(*self.package.split("."))

    @property
    def generated(self) -> tuple[str, str]:
        stem = self.proto.removesuffix(".proto")
        return f"{stem}_pb2.py", f"{stem}_pb2_grpc.py"

    @property
    def files(self) -> tuple[str, ...]:
        return (self.proto, *self.generated)


APIS = {
    "deviceplugin": Api("pkg/apis/deviceplugin/v1beta1/api.proto", "gpushare_stack.api", "api.proto"),
    "dra": Api("pkg/apis/dra/v1/api.proto", "gpushare_stack.api.dra", "dra.proto"),
    "pluginregistration": Api(
        "pkg/apis/pluginregistration/v1/api.proto", "gpushare_stack.api.pluginregistration", "registration.proto"
    ),
}

_GOGO_IMPORT = re.compile(r'^\s*import\s+"github\.com/gogo/protobuf/gogoproto/gogo\.proto"\s*;\s*\n', re.M)
_GOGO_FILE_OPTION = re.compile(r"^\s*option\s+\(gogoproto\.[A-Za-z_]+\)\s*=\s*[^;]+;\s*\n", re.M)
_GOGO_FIELD_OPTION = re.compile(r"\(gogoproto\.[A-Za-z_]+\)\s*=\s*[^,\]]+")
_FIELD_OPTIONS = re.compile(r"\s*\[([^\]]*)\]")

HEADER = (
    "// Copied from k8s.io/kubelet@{version} {upstream} by\n"
    "// gpushare_stack/api/generate.py (gogoproto imports and options stripped, see there).\n"
)


def _strip_field_options(match: re.Match[str]) -> str:
    """Drop gogoproto entries from one ``[...]`` option list; drop the list if empty."""
    kept = [part.strip() for part in _GOGO_FIELD_OPTION.sub("", match.group(1)).split(",") if part.strip()]
    return f" [{', '.join(kept)}]" if kept else ""


def strip_gogo(text: str) -> str:
    """Return ``text`` without gogoproto imports, file options and field options."""
    text = _GOGO_IMPORT.sub("", text)
    text = _GOGO_FILE_OPTION.sub("", text)
    return _FIELD_OPTIONS.sub(_strip_field_options, text)


def render_proto(api: Api, source: Path, version: str = KUBELET_VERSION) -> str:
    """The text of the copy of ``api`` for an upstream ``source``."""
    return HEADER.format(version=version, upstream=api.upstream) + strip_gogo(source.read_text())


def generate(api: Api, source: Path, out_dir: Path) -> dict[str, str]:
    """Write the copy of ``api`` and its stubs to ``out_dir``; return {file name: text}."""
    from grpc_tools import protoc  # dev extra; imported here so the stubs never need it

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        pkg = root.joinpath(*api.package.split("."))
        pkg.mkdir(parents=True)
        (pkg / api.proto).write_text(render_proto(api, source))
        # -I at the root makes the generated grpc module import e.g.
        # ``from gpushare_stack.api import api_pb2`` instead of a top-level ``api_pb2``.
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{root}",
                f"--python_out={root}",
                f"--grpc_python_out={root}",
                str(pkg / api.proto),
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit status {rc} on {source}")
        out_dir.mkdir(parents=True, exist_ok=True)
        texts = {}
        for name in api.files:
            text = (pkg / name).read_text()
            (out_dir / name).write_text(text)
            texts[name] = text
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--api",
        choices=sorted(APIS),
        action="append",
        help="which API to generate (repeatable; default: all)",
    )
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help=f"the upstream .proto (with one --api; default: its file under {KUBELET_MODULE})",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where the copy and the stubs are written (with one --api; default: the API's package)",
    )
    args = parser.parse_args(argv)
    names = args.api or sorted(APIS)
    if (args.source or args.out_dir) and len(names) != 1:
        parser.error("--source and --out-dir go with exactly one --api")
    for name in names:
        api = APIS[name]
        source = args.source or api.source
        if not source.is_file():
            parser.error(f"--source {source}: no such file (build Kubernetes once: bash ci/setup.sh)")
        out_dir = args.out_dir or api.directory
        generate(api, source, out_dir)
        print(f"{name}: wrote {', '.join(api.files)} to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
