"""Any input, however odd, is either parsed or refused with EvidenceParseError.

Inputs are mutations of the real samples in `samples/` (cut, duplicated, glued, with
tokens of every format, non-ASCII digits, long runs and random text spliced in) and
plain random text. The number of examples is bounded so the module runs in well under
a minute; each example is small, so a parser that stalls shows as a slow run.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushare_conformance.evidence import EvidenceParseError, parse_nvidia_smi, parse_tf_log

SAMPLES = Path(__file__).parent / "samples"
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))


def _corpus(kind: str) -> list[str]:
    paths = sorted(p for p in (SAMPLES / kind).iterdir() if not p.name.endswith((".expected.json", ".fields")))
    return [p.read_text() for p in paths]


SMI_SAMPLES = _corpus("nvidia-smi")
TF_SAMPLES = _corpus("tf-log")
FIELD_LISTS = [
    p.read_text().strip().split(",") for p in sorted((SAMPLES / "nvidia-smi").iterdir()) if p.name.endswith(".fields")
]

# pieces of every format, spliced in whole so mutations reach deep into the parsers
TOKENS = [
    "|",
    "+",
    ",",
    "\n",
    "\r",
    "\r\n",
    "\t",
    " ",
    "\ufeff",
    "\x00",
    "MiB",
    "iB",
    "GiB",
    "KiB",
    "B",
    "bytes",
    "N/A",
    "[N/A]",
    "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |",
    "|=========================+======================+======================|",
    "+-----------------------------------------------------------------------------+",
    "|   0  Tesla T4            On   | 00000000:00:04.0 Off |                    0 |",
    "| N/A   34C    P8     9W /  70W |      2MiB / 15360MiB |      0%      Default |",
    "| MIG devices:",
    "| Processes:",
    "GPU 0: Tesla T4 (UUID: GPU-1)",
    "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-1/1/0)",
    "index, name, memory.total [MiB]",
    "No devices were found",
    "NVIDIA-SMI has failed",
    "<nvidia_smi_log>",
    "</nvidia_smi_log>",
    "<attached_gpus>",
    "</attached_gpus>",
    '<gpu id="00000000:00:04.0">',
    "</gpu>",
    "<fb_memory_usage><total>",
    "</total></fb_memory_usage>",
    '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
    "&amp;",
    "&#0;",
    "Found device 0 with properties: ",
    "name: Tesla V100-SXM2-16GB major: 7 minor: 0",
    "pciBusID: 0000:00:04.0 name: Tesla T4 computeCapability: 7.5",
    "totalMemory: ",
    "freeMemory: ",
    "Total memory: ",
    "deviceMemorySize: ",
    "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14116 MB memory) -> physical GPU (",
    "device: 0, name: Tesla T4, pci bus id: 0000:00:04.0, compute capability: 7.5)",
    "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 14116 MB memory:  -> ",
    "Creating TensorFlow device (/gpu:0) -> (",
    "torch.cuda.mem_get_info(0): (",
    "get_device_properties(0): _CudaDeviceProperties(name='T4', major=7, minor=5, total_memory=",
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; ",
    " total capacity; 3.50 GiB already allocated; ",
    " free; ",
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of ",
    " of which ",
    " is free.",
    "CUDA_ERROR_NO_DEVICE",
    "4.21",
    "4309",
    "0",
    "2\u00b2",  # a superscript: str.isdigit() says yes, int() says no
    "\u0663",  # ARABIC-INDIC DIGIT THREE
    "\uff15",  # FULLWIDTH DIGIT FIVE
    "1e400",
]
# long runs: past int()'s 4300-digit limit, past the csv module's field limit of 131072
RUNS = st.tuples(st.sampled_from(["9", " ", "x", "|", ",", "\t", "0.", "name: ", "a\u00b2"]), st.integers(1, 140_000))
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)
# what a number may turn into: non-ASCII digits, too many digits, a float's overflow, nothing
NUMBER_EDITS = ["{}\u00b2", "\u00b2", "\u0663{}", "\uff15", "9" * 5000, "{}" * 3, "{}e400", "-{}", "{}.", ".{}", ""]
STRETCH_CHARS = 200_000
_TOKEN = re.compile(r"[0-9]+|[A-Za-z]+|\s+|[^0-9A-Za-z\s]")


def _edit_token(draw, token: str) -> str:
    """One field-level change: a unit losing a letter (GiB -> iB), a number gone odd, a token swapped."""
    kind = draw(st.sampled_from(["drop-char", "number", "token", "text", "stretch"]))
    if kind == "drop-char" and token:
        at = draw(st.integers(0, len(token) - 1))
        return token[:at] + token[at + 1 :]
    if kind == "number":
        return draw(st.sampled_from(NUMBER_EDITS)).replace("{}", token)
    if kind == "token":
        return draw(st.sampled_from(TOKENS))
    if kind == "stretch":  # repeated, to at most STRETCH_CHARS (a long run stretched would take gigabytes)
        return token * draw(st.integers(2, max(2, min(5000, STRETCH_CHARS // max(len(token), 1)))))
    return draw(any_text)


@st.composite
def mutated(draw, corpus: list[str]) -> str:
    text = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(1, 6))):
        action = draw(
            st.sampled_from(
                ["token", "token", "token", "insert", "delete", "duplicate", "truncate", "join", "run", "swap"]
            )
        )
        if action == "token":  # a token of one class (numbers, words, punctuation, spaces), edited
            tokens = _TOKEN.findall(text)
            cls = draw(st.sampled_from([r"[0-9]", r"[A-Za-z]", r"[^0-9A-Za-z\s]", r"\s", r"."]))
            chosen = [n for n, token in enumerate(tokens) if re.match(cls, token)]
            if chosen:
                n = draw(st.sampled_from(chosen))
                tokens[n] = _edit_token(draw, tokens[n])
            text = "".join(tokens)
            continue
        size = len(text)
        start = draw(st.integers(0, size))
        end = draw(st.integers(start, min(size, start + 400)))
        if action == "insert":
            text = text[:start] + draw(st.one_of(st.sampled_from(TOKENS), any_text)) + text[start:]
        elif action == "delete":
            text = text[:start] + text[end:]
        elif action == "duplicate":
            text = text[:end] + text[start:end] * draw(st.integers(1, 4)) + text[end:]
        elif action == "truncate":
            text = text[:start]
        elif action == "join":  # lines glued, as a copy that lost its line breaks
            text = text[:start] + text[start:end].replace("\n", draw(st.sampled_from(["", " ", "\r"]))) + text[end:]
        elif action == "run":
            piece, count = draw(RUNS)
            text = text[:start] + (piece * count)[:count] + text[start:]
        else:
            lines = text.splitlines(keepends=True)
            if len(lines) > 1:
                a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
                lines[a], lines[b] = lines[b], lines[a]
            text = "".join(lines)
    return text


def _parses_or_refuses(parse, text: str, **kwargs) -> None:
    try:
        report = parse(text, **kwargs)
    except EvidenceParseError as exc:
        assert str(exc)  # the message renders
        return
    assert isinstance(report.to_dict(), dict)


@FUZZ
@given(st.one_of(mutated(SMI_SAMPLES), mutated(TF_SAMPLES), any_text), st.sampled_from([None, *FIELD_LISTS]))
def test_nvidia_smi_parser_parses_or_refuses_anything(text: str, fields: list[str] | None) -> None:
    _parses_or_refuses(parse_nvidia_smi, text, csv_fields=fields)


@FUZZ
@given(st.one_of(mutated(TF_SAMPLES), mutated(SMI_SAMPLES), any_text))
def test_tf_log_parser_parses_or_refuses_anything(text: str) -> None:
    _parses_or_refuses(parse_tf_log, text)
