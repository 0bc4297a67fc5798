"""Random cards rendered in every nvidia-smi layout parse back to the same cards."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smi_render import LAYOUTS, Card, Mig, collapse, indent, memory_shown, printed_name, render_table, wrap

from gpushare_conformance.evidence import EvidenceParseError, parse_nvidia_smi
from gpushare_conformance.evidence.smi_fields import KNOWN_FIELDS_LOWER, QUERY_GPU_ALIASES, QUERY_GPU_FIELDS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_NAME_CHARS = st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-. ")
names = st.one_of(
    st.sampled_from(
        [
            "Tesla V100-SXM2-16GB",
            "Tesla T4",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA GeForce RTX 3060 Laptop GPU",
            "NVIDIA H200",
            "A10",
        ]
    ),
    st.text(_NAME_CHARS, min_size=1, max_size=40).map(lambda s: " ".join(s.split())).filter(bool),
).filter(lambda name: name not in ("N/A", "Not Supported"))  # placeholders, not names
versions = st.from_regex(r"\A[1-9][0-9]{2}\.[0-9]{2,3}(\.[0-9]{2})?\Z")
cuda_versions = st.from_regex(r"\A1[0-3]\.[0-9]\Z")


@st.composite
def cards(draw, max_total: int, mig: bool):
    count = draw(st.integers(1, 8))
    out = []
    for index in range(count):
        total = draw(st.integers(1, max_total))
        mode = draw(st.sampled_from(["N/A", "Disabled", "Enabled"])) if mig else "N/A"
        migs = []
        if mode == "Enabled":
            for dev in range(draw(st.integers(0, 3))):
                mig_total = draw(st.integers(1, 99999))
                migs.append(
                    Mig(
                        gi=draw(st.integers(0, 14)),
                        ci=draw(st.integers(0, 7)),
                        dev=dev,
                        used=draw(st.integers(0, mig_total)),
                        total=mig_total,
                    )
                )
        out.append(
            Card(
                index=index,
                name=draw(names),
                used=draw(st.integers(0, total)),
                total=total,
                bus=f"00000000:{draw(st.integers(0, 255)):02X}:00.0",
                persistence=draw(st.sampled_from(["On", "Off"])),
                mig_mode=mode,
                migs=migs,
            )
        )
    return out


@st.composite
def table_cases(draw):
    layout = LAYOUTS[draw(st.sampled_from(sorted(LAYOUTS)))]
    max_total = 99999 if layout.widths[1] == 22 else 999999
    return layout, draw(cards(max_total, layout.mig_row)), draw(versions), draw(cuda_versions)


def _expected_cards(layout, cards_, squash: bool):
    def name(card):
        shown = printed_name(layout, card.name)
        return " ".join(shown.split()) if squash else shown

    return [
        (
            card.index,
            name(card),
            card.used if memory_shown(layout, card) else None,
            card.total if memory_shown(layout, card) else None,
            None if card.mig_mode == "N/A" or not layout.mig_row else card.mig_mode,
            [(m.gi, m.ci, m.dev, m.used, m.total) for m in card.migs],
        )
        for card in cards_
    ]


def _observed(report, squash: bool):
    return [
        (
            g.index,
            " ".join(g.name.split()) if squash else g.name,
            g.memory_used_mib,
            g.memory_total_mib,
            g.mig_mode,
            [
                (m.gpu_instance_id, m.compute_instance_id, m.device_index, m.memory_used_mib, m.memory_total_mib)
                for m in g.mig_devices
            ],
        )
        for g in report.gpus
    ]


@SETTINGS
@given(
    table_cases(),
    st.sampled_from(["as-is", "indented", "collapsed", "collapsed+indented", "wrapped-80"]),
    st.booleans(),
)
def test_table_round_trip(case, copy_style, with_processes):
    layout, cards_, driver, cuda = case
    text = render_table(layout, cards_, driver, cuda, with_processes=with_processes)
    if "collapsed" in copy_style:
        text = collapse(text)
    if "indented" in copy_style:
        text = indent(text, "    ")
    if copy_style == "wrapped-80":
        text = wrap(text, 80)
    report = parse_nvidia_smi(text)
    assert report.format == "table"
    assert report.driver_version == driver
    assert report.cuda_version == (cuda if layout.cuda else None)
    squash = "collapsed" in copy_style
    # names keep inner spacing unless the copy collapsed it
    assert _observed(report, squash=True) == _expected_cards(layout, cards_, squash=True)
    if not squash:
        assert [g.name for g in report.gpus] == [printed_name(layout, c.name) for c in cards_]
    assert [g.bus_id for g in report.gpus] == [c.bus for c in cards_]


CSV_FIELDS = ["index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "memory.free"]
PLACEHOLDERS = ["[N/A]", "[Not Supported]", "[Insufficient Permissions]", "N/A"]


@st.composite
def csv_cases(draw):
    fields = draw(st.permutations(CSV_FIELDS).flatmap(lambda p: st.integers(2, len(p)).map(lambda n: p[:n])))
    if not any(f in fields for f in ("index", "name", "uuid", "memory.total")):
        fields = ["index", *fields]
    header, units = draw(st.booleans()), draw(st.booleans())
    rows, expected = [], []
    for index in range(draw(st.integers(1, 8))):
        total = draw(st.integers(1, 200000))
        values = {
            "index": str(index),
            "name": draw(names),
            "uuid": f"GPU-{draw(st.uuids())}",
            "pci.bus_id": f"00000000:{index:02X}:00.0",
            "memory.total": total,
            "memory.used": draw(st.integers(0, total)),
            "memory.free": draw(st.integers(0, total)),
        }
        for key in ("memory.total", "memory.used", "memory.free"):
            if draw(st.integers(0, 9)) == 0:
                values[key] = draw(st.sampled_from(PLACEHOLDERS))
        cells = [f"{values[f]} MiB" if units and isinstance(values[f], int) else str(values[f]) for f in fields]
        rows.append(", ".join(cells))
        expected.append({f: (None if values[f] in PLACEHOLDERS else values[f]) for f in fields})
    lines = []
    if header:
        lines.append(", ".join(f"{f} [MiB]" if f.startswith("memory.") and units else f for f in fields))
    return fields, header, "\n".join(lines + rows) + "\n", expected


@SETTINGS
@given(csv_cases())
def test_csv_round_trip(case):
    fields, header, text, expected = case
    report = parse_nvidia_smi(text, csv_fields=None if header else fields)
    assert report.format == "csv"
    assert len(report.gpus) == len(expected)
    for position, (gpu, want) in enumerate(zip(report.gpus, expected, strict=True)):
        assert gpu.index == (int(want["index"]) if "index" in want else position)
        assert gpu.name == want.get("name")
        assert gpu.uuid == want.get("uuid")
        assert gpu.bus_id == want.get("pci.bus_id")
        assert gpu.memory_total_mib == want.get("memory.total")
        assert gpu.memory_used_mib == want.get("memory.used")
        assert gpu.memory_free_mib == want.get("memory.free")


@SETTINGS
@given(
    st.lists(
        st.tuples(
            names, st.uuids(), st.lists(st.sampled_from(["1g.5gb", "2g.10gb", "3g.20gb", "7g.80gb"]), max_size=3)
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_list_round_trip(gpus, indented):
    lines = []
    for index, (name, uuid, profiles) in enumerate(gpus):
        lines.append(f"GPU {index}: {name} (UUID: GPU-{uuid})")
        for dev, profile in enumerate(profiles):
            lines.append(f"  MIG {profile:<11} Device {dev:>2}: (UUID: MIG-{uuid})")
    text = "\n".join(("  " + line if indented else line) for line in lines) + "\n"
    report = parse_nvidia_smi(text)
    assert report.format == "list"
    assert [(g.index, g.name, g.uuid) for g in report.gpus] == [(i, n, f"GPU-{u}") for i, (n, u, _) in enumerate(gpus)]
    assert [[m.profile for m in g.mig_devices] for g in report.gpus] == [p for _, _, p in gpus]


@SETTINGS
@given(st.lists(st.tuples(names, st.integers(1, 200000), st.data()), min_size=1, max_size=8), versions)
def test_xml_round_trip(gpus, driver):
    root = ET.Element("nvidia_smi_log")
    ET.SubElement(root, "driver_version").text = driver
    ET.SubElement(root, "cuda_version").text = "12.2"
    ET.SubElement(root, "attached_gpus").text = str(len(gpus))
    expected = []
    for index, (name, total, data) in enumerate(gpus):
        used = data.draw(st.integers(0, total))
        gpu = ET.SubElement(root, "gpu", id=f"00000000:{index:02X}:00.0")
        ET.SubElement(gpu, "product_name").text = name
        bar1 = ET.SubElement(gpu, "bar1_memory_usage")  # before fb on purpose: same child names
        ET.SubElement(bar1, "total").text = "65536 MiB"
        ET.SubElement(bar1, "used").text = "1 MiB"
        fb = ET.SubElement(gpu, "fb_memory_usage")
        ET.SubElement(fb, "total").text = f"{total} MiB"
        ET.SubElement(fb, "used").text = f"{used} MiB"
        ET.SubElement(fb, "free").text = f"{total - used} MiB"
        expected.append((index, name, used, total))
    text = '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n' + ET.tostring(
        root, encoding="unicode"
    )
    report = parse_nvidia_smi(text)
    assert report.format == "xml" and report.driver_version == driver
    assert [(g.index, g.name, g.memory_used_mib, g.memory_total_mib) for g in report.gpus] == expected
    json.dumps(report.to_dict())  # serialisable


# --- wide queries: any real --query-gpu fields, any order, any placeholders ---------

ALL_PLACEHOLDERS = [
    "[N/A]",
    "N/A",
    "[Not Supported]",
    "[Unknown Error]",
    "[Insufficient Permissions]",
    "[Requested functionality has been deprecated]",
    "[GPU is lost]",
]
_CORE_OF = {
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "pci.bus_id": "pci.bus_id",
    "gpu_bus_id": "pci.bus_id",
    "memory.total": "memory.total",
    "memory.used": "memory.used",
    "memory.free": "memory.free",
    "driver_version": "driver_version",
    "mig.mode.current": "mig.mode.current",
    "fb_memory_usage.total": "memory.total",
}
# fields a newer driver might add: the parser must not need to know them
future_fields = st.from_regex(r"\A[a-z]{2,8}(\.[a-z]{2,6}[A-Z][a-z]{1,6}){1,2}\Z").filter(
    lambda f: f.lower() not in KNOWN_FIELDS_LOWER
)
other_values = st.one_of(
    st.sampled_from(
        [
            "Enabled",
            "Disabled",
            "Not Active",
            "Active",
            "P0",
            "P8",
            "Default",
            "No",
            "Valid",
            "None",
            "0x3",
            "0x233010DE",
        ]
    ),
    st.integers(0, 99999).map(str),
    st.decimals(0, 1000, places=2).map(str),
    st.from_regex(r"\A[0-9]{2}(\.[0-9]{2}){4}\Z"),
)


def _unit(field: str) -> str | None:
    if field.startswith(("memory.", "protected_memory.")) or field == "fb_memory_usage.total":
        return "MiB"
    if field.startswith("utilization.") or field in ("fan.speed", "edpp_multiplier"):
        return "%"
    if (
        field.startswith(("power.draw", "power.limit", "power.default_limit", "power.min_limit", "power.max_limit"))
        or field == "enforced.power.limit"
    ):
        return "W"
    if field.startswith("clocks.") and not field.startswith("clocks_"):
        return "MHz"
    if field.startswith("clocks_event_reasons_counters."):
        return "us"
    return None


def _shown_core(core: dict, fields: list[str], key: str):
    """What the parser must report for `key`: None when not queried or a placeholder."""
    value = core[key]
    queried = any(_CORE_OF.get(field.lower()) == key for field in fields)
    return None if value in ALL_PLACEHOLDERS or not queried else value


@st.composite
def wide_csv_cases(draw):
    real = sorted(set(QUERY_GPU_FIELDS + QUERY_GPU_ALIASES))
    width = draw(st.integers(2, 200))
    fields = draw(st.lists(st.sampled_from(real), min_size=1, max_size=width, unique=True))
    fields += draw(st.lists(future_fields, max_size=4, unique=True))
    if not any(
        _CORE_OF.get(f) in ("index", "name", "uuid", "memory.total", "memory.used", "memory.free") for f in fields
    ):
        fields.append("memory.total")
    fields = draw(st.permutations(fields))
    if "timestamp" in fields and draw(st.booleans()):
        fields.remove("timestamp")
        fields.insert(0, "timestamp")
    header, units = draw(st.booleans()), draw(st.booleans())
    rows, expected = [], []
    driver = draw(versions)
    for index in range(draw(st.integers(1, 8))):
        total = draw(st.integers(1, 200000))
        core = {
            "index": str(index),
            "name": draw(names),
            "uuid": f"GPU-{draw(st.uuids())}",
            "pci.bus_id": f"00000000:{index:02X}:00.0",
            "memory.total": total,
            "memory.used": draw(st.integers(0, total)),
            "memory.free": draw(st.integers(0, total)),
            "driver_version": driver,
            "mig.mode.current": draw(st.sampled_from(["Enabled", "Disabled"])),
        }
        for key in core:
            if key not in ("index", "driver_version") and draw(st.integers(0, 7)) == 0:
                core[key] = draw(st.sampled_from(ALL_PLACEHOLDERS))
        cells, other = [], {}
        for field in fields:
            key = _CORE_OF.get(field.lower())
            if key is not None:
                value = core[key]
            elif field == "timestamp":
                value = f"2026/12/03 09:41:{draw(st.integers(0, 59)):02d}.{draw(st.integers(0, 999)):03d}"
            else:
                value = draw(st.one_of(other_values, st.sampled_from(ALL_PLACEHOLDERS)))
            shown = str(value)
            if units and _unit(field) and shown not in ALL_PLACEHOLDERS:
                shown = f"{shown} {_unit(field)}"
            cells.append(shown)
            if key is None:
                other[field] = None if shown in ALL_PLACEHOLDERS else shown
        rows.append(", ".join(cells))
        expected.append(
            {
                "index": index,
                "name": _shown_core(core, fields, "name"),
                "uuid": _shown_core(core, fields, "uuid"),
                "bus": _shown_core(core, fields, "pci.bus_id"),
                "total": _shown_core(core, fields, "memory.total"),
                "used": _shown_core(core, fields, "memory.used"),
                "free": _shown_core(core, fields, "memory.free"),
                "other": other,
            }
        )
    lines = []
    if header:
        lines.append(", ".join(f"{f} [{_unit(f)}]" if units and _unit(f) else f for f in fields))
    return fields, header, "\n".join(lines + rows) + "\n", expected


@SETTINGS
@given(wide_csv_cases())
def test_wide_csv_round_trip(case):
    fields, header, text, expected = case
    report = parse_nvidia_smi(text, csv_fields=None if header else fields)
    assert report.format == "csv"
    got = [
        {
            "index": g.index,
            "name": g.name,
            "uuid": g.uuid,
            "bus": g.bus_id,
            "total": g.memory_total_mib,
            "used": g.memory_used_mib,
            "free": g.memory_free_mib,
            "other": g.other,
        }
        for g in report.gpus
    ]
    assert got == expected


@SETTINGS
@given(wide_csv_cases(), st.data())
def test_wide_csv_row_cut_short_is_an_error(case, data):
    fields, header, text, _ = case
    lines = text.splitlines()
    row = data.draw(st.integers(1 if header else 0, len(lines) - 1))
    cells = lines[row].split(", ")
    lines[row] = ", ".join(cells[:-1]) if len(cells) > 1 else lines[row] + ", 1"
    with pytest.raises(EvidenceParseError) as info:
        parse_nvidia_smi("\n".join(lines) + "\n", csv_fields=None if header else fields)
    assert info.value.line_number == row + 1
    assert f"expected {len(fields)} values" in str(info.value)
