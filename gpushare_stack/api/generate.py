"""Regenerate the device-plugin gRPC stubs from the kubelet's own ``api.proto``.

The wire format must be the kubelet's, so the stubs are generated from the upstream
file of ``k8s.io/kubelet`` (``pkg/apis/deviceplugin/v1beta1/api.proto``), never written
by hand. The upstream file is copied to ``gpushare_stack/api/api.proto`` with exactly
these edits, none of which changes a message, field number or service:

1. ``import "github.com/gogo/protobuf/gogoproto/gogo.proto";`` lines are removed
   (gogoproto is a Go code-generation plugin; protoc for Python cannot resolve it).
2. File-level ``option (gogoproto.<name>) = <value>;`` lines are removed.
3. Field-level gogoproto options, ``[(gogoproto.<name>) = <value>, ...]``, are removed
   from field declarations (other field options are kept).

Releases up to v0.30 carry all three; v0.34.x no longer uses gogoproto, so for it the
copy is byte-identical to upstream apart from the header comment this script adds.

Run: ``python -m gpushare_stack.api.generate [--source PATH]`` (needs grpcio-tools,
the ``dev`` extra). ``tests/stack/test_api_generation.py`` checks that the committed
files equal a fresh generation.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

KUBELET_VERSION = "v0.34.4"
DEFAULT_SOURCE = Path(f"/root/go/pkg/mod/k8s.io/kubelet@{KUBELET_VERSION}/pkg/apis/deviceplugin/v1beta1/api.proto")
API_DIR = Path(__file__).resolve().parent
REPO_ROOT = API_DIR.parent.parent
PROTO_NAME = "api.proto"
GENERATED = ("api_pb2.py", "api_pb2_grpc.py")

_GOGO_IMPORT = re.compile(r'^\s*import\s+"github\.com/gogo/protobuf/gogoproto/gogo\.proto"\s*;\s*\n', re.M)
_GOGO_FILE_OPTION = re.compile(r"^\s*option\s+\(gogoproto\.[A-Za-z_]+\)\s*=\s*[^;]+;\s*\n", re.M)
_GOGO_FIELD_OPTION = re.compile(r"\(gogoproto\.[A-Za-z_]+\)\s*=\s*[^,\]]+")
_FIELD_OPTIONS = re.compile(r"\s*\[([^\]]*)\]")

HEADER = (
    "// Copied from k8s.io/kubelet@{version} pkg/apis/deviceplugin/v1beta1/api.proto by\n"
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


def render_proto(source: Path, version: str = KUBELET_VERSION) -> str:
    """The text of ``gpushare_stack/api/api.proto`` for an upstream ``source``."""
    return HEADER.format(version=version) + strip_gogo(source.read_text())


def generate(source: Path, out_dir: Path) -> dict[str, str]:
    """Write api.proto and the stubs to ``out_dir`` (a ``gpushare_stack/api`` folder
    under a scratch root or the repo); return {file name: text} of the stubs."""
    from grpc_tools import protoc  # dev extra; imported here so the stubs never need it

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        pkg = root / "gpushare_stack" / "api"
        pkg.mkdir(parents=True)
        (pkg / PROTO_NAME).write_text(render_proto(source))
        # -I at the root makes the generated grpc module import
        # ``from gpushare_stack.api import api_pb2`` instead of a top-level ``api_pb2``.
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{root}",
                f"--python_out={root}",
                f"--grpc_python_out={root}",
                str(pkg / PROTO_NAME),
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit status {rc} on {source}")
        out_dir.mkdir(parents=True, exist_ok=True)
        texts = {}
        for name in (PROTO_NAME, *GENERATED):
            text = (pkg / name).read_text()
            (out_dir / name).write_text(text)
            texts[name] = text
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=DEFAULT_SOURCE,
        help=f"upstream api.proto of k8s.io/kubelet {KUBELET_VERSION} (default: %(default)s)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=API_DIR,
        help="where api.proto and the stubs are written (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if not args.source.is_file():
        parser.error(f"--source {args.source}: no such file")
    generate(args.source, args.out_dir)
    print(f"wrote {', '.join((PROTO_NAME, *GENERATED))} to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
