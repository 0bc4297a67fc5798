"""`gpushare-conformance parse nvidia-smi|tf-log FILE`: evidence as JSON.

FILE may be `-` or `/dev/stdin`. Unreadable or unparseable input exits 1 with the
reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpushare_conformance.evidence import EvidenceParseError, parse_nvidia_smi, parse_tf_log


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _run(args: argparse.Namespace) -> int:
    try:
        text = _read(args.file)
    except OSError as exc:
        print(f"gpushare-conformance parse: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        if args.kind == "nvidia-smi":
            fields = [f for f in args.fields.split(",") if f.strip()] if args.fields else None
            report = parse_nvidia_smi(text, csv_fields=fields)
        else:
            report = parse_tf_log(text)
    except EvidenceParseError as exc:
        print(f"gpushare-conformance parse {args.kind}: {args.file}: {exc}", file=sys.stderr)
        return 1
    json.dump(report.to_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("parse", help="parse nvidia-smi output or a TensorFlow/PyTorch log into JSON")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    smi = kinds.add_parser("nvidia-smi", help="any nvidia-smi form: table, -L, --query-gpu CSV, -q -x")
    smi.add_argument("file", metavar="FILE", help="capture to read; '-' or /dev/stdin for standard input")
    smi.add_argument("--fields", help="the --query-gpu field list, for CSV printed with noheader")
    smi.set_defaults(func=_run)
    tf = kinds.add_parser("tf-log", help="a TensorFlow (1.x-2.x) or PyTorch probe log")
    tf.add_argument("file", metavar="FILE", help="log to read; '-' or /dev/stdin for standard input")
    tf.set_defaults(func=_run)
