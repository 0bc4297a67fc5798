"""Renders nvidia-smi output in every layout, column-exact, for the property tests.

Widths follow the real tool: 79 columns (31/22/22) up to driver 525, 89 (41/22/22)
for 530-545, 91 (41/24/22) from 550. Names are truncated as the tool does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Mig:
    gi: int
    ci: int
    dev: int
    used: int
    total: int


@dataclass
class Card:
    index: int
    name: str
    used: int
    total: int
    bus: str
    persistence: str = "On"
    mig_mode: str = "N/A"  # N/A, Disabled, Enabled
    migs: list[Mig] = field(default_factory=list)
    uuid: str = ""


@dataclass(frozen=True)
class Layout:
    key: str
    widths: tuple[int, int, int]
    mig_row: bool
    header_rule_plus: bool = False
    kmd: bool = False
    glued: bool = False
    cuda: bool = True

    @property
    def width(self) -> int:
        return sum(self.widths) + 4


LAYOUTS = {
    "396": Layout("396", (31, 22, 22), mig_row=False, cuda=False),
    "418": Layout("418", (31, 22, 22), mig_row=False),
    "470": Layout("470", (31, 22, 22), mig_row=True),
    "530": Layout("530", (41, 22, 22), mig_row=True, glued=True),
    "535": Layout("535", (41, 22, 22), mig_row=True),
    "550": Layout("550", (41, 24, 22), mig_row=True),
    "580": Layout("580", (41, 24, 22), mig_row=True, header_rule_plus=True),
    "610": Layout("610", (41, 24, 22), mig_row=True, header_rule_plus=True, kmd=True),
}


def printed_name(layout: Layout, name: str) -> str:
    limit = 18 if layout.widths[0] == 31 else 27
    return name if len(name) <= limit else name[: limit - 3] + "..."


def memory_shown(layout: Layout, card: Card) -> bool:
    """580+ print N/A in the memory cell of a MIG-enabled card."""
    return not (layout.header_rule_plus and card.mig_mode == "Enabled")


def _rule(widths: tuple[int, ...], edge: str = "+", fill: str = "-") -> str:
    return edge + "+".join(fill * w for w in widths) + edge


def _row(cells: list[str], widths: tuple[int, ...]) -> str:
    for cell, width in zip(cells, widths, strict=True):
        assert len(cell) == width, (cell, width)
    return "|" + "|".join(cells) + "|"


def render_table(layout: Layout, cards: list[Card], driver: str, cuda: str, with_processes: bool = True) -> str:
    w1, w2, w3 = layout.widths
    inner = layout.width - 2
    lines = ["Wed Jun 14 03:24:14 2023       ", "+" + "-" * inner + "+"]
    if layout.kmd:
        head = f" NVIDIA-SMI {driver:<21}KMD Version: {driver:<15}CUDA UMD Version: {cuda}"
    elif layout.cuda:
        head = f" NVIDIA-SMI {driver:<12} Driver Version: {driver:<12} CUDA Version: {cuda}"
    else:
        head = f" NVIDIA-SMI {driver:<21} Driver Version: {driver}"
    lines.append("|" + head.ljust(inner) + "|")
    lines.append(_rule(layout.widths, "+" if layout.header_rule_plus else "|"))
    if w1 == 31:
        titles = [
            (" GPU  Name        Persistence-M", " Bus-Id        Disp.A ", " Volatile Uncorr. ECC "),
            (" Fan  Temp  Perf  Pwr:Usage/Cap", "         Memory-Usage ", " GPU-Util  Compute M. "),
        ]
    else:
        persistence = (
            " GPU  Name                  Persistence-M" if layout.glued else " GPU  Name                 Persistence-M "
        )
        titles = [
            (persistence, " Bus-Id        Disp.A ".rjust(w2), " Volatile Uncorr. ECC "),
            (" Fan  Temp   Perf          Pwr:Usage/Cap ", "Memory-Usage ".rjust(w2), " GPU-Util  Compute M. "),
        ]
    if layout.mig_row:
        titles.append((" " * w1, " " * w2, "               MIG M. "))
    for title in titles:
        lines.append(_row([title[0].ljust(w1), title[1].ljust(w2), title[2]], layout.widths))
    lines.append(_rule(layout.widths, "|", "="))
    for card in cards:
        name = printed_name(layout, card.name)
        if w1 == 31:
            c1 = f"{card.index:>4}  {name:<18}  {card.persistence:<5}"
            pwr = f"{'61W':>4} / {'300W':>4}"
            c4 = f" {'N/A':>3}  {'38C':>4}  {'P0':>4}  {pwr:>12} "
        else:
            c1 = (
                f"{card.index:>4}  {name:<32}{card.persistence:>3}"
                if layout.glued
                else f"{card.index:>4}  {name:<27}{'':4}{card.persistence:<4}"
            )
            pwr = f"{'61W':>5} / {'300W':>5}"
            c4 = f" {'N/A':>3}  {'38C':>4}   {'P0':>4}  {pwr:>21} "
        bus = f" {card.bus:<16} {'Off':>3} " if w2 == 22 else f"   {card.bus:<16} {'Off':>3} "
        lines.append(_row([c1, bus, f" {'0':>20} "], layout.widths))
        if memory_shown(layout, card):
            memory = f" {str(card.used) + 'MiB':>{9 if w2 == 22 else 10}} / {str(card.total) + 'MiB':>{8 if w2 == 22 else 9}} "
        else:
            memory = f"{'N/A':>{w2 - 3}}   "
        lines.append(_row([c4, memory, f" {'0%':>7}  {'Default':>11} "], layout.widths))
        if layout.mig_row:
            lines.append(_row([" " * w1, " " * w2, f" {card.mig_mode:>20} "], layout.widths))
        lines.append(_rule(layout.widths))
    migs = [(card, mig) for card in cards for mig in card.migs]
    if layout.mig_row and any(card.mig_mode == "Enabled" for card in cards):
        lines.append(" " * layout.width)
        mw = (18, layout.width - 5 - 18 - 11 - 23, 11, 23)
        lines += ["+" + "-" * inner + "+", "|" + " MIG devices:".ljust(inner) + "|", _rule(mw)]
        lines.append(
            _row([" GPU  GI  CI  MIG ", "Memory-Usage ".rjust(mw[1]), "        Vol", "         Shared        "], mw)
        )
        lines.append(
            _row(["      ID  ID  Dev ", "BAR1-Usage ".rjust(mw[1]), " SM     Unc", " CE  ENC  DEC  OFA  JPG"], mw)
        )
        lines.append(_row([" " * 18, " " * mw[1], "        ECC", " " * 23], mw))
        lines.append(_rule(mw, "|", "="))
        if not migs:
            lines.append("|" + "  No MIG devices found".ljust(inner) + "|")
            lines.append("+" + "-" * inner + "+")
        for card, mig in migs:
            first = f"{card.index:>3}  {mig.gi:>3} {mig.ci:>3} {mig.dev:>3}  "
            memory = f" {f'{mig.used}MiB / {mig.total}MiB':>{mw[1] - 2}} "
            lines.append(_row([first, memory, " 42      0 ", "  3   0    2    0    0 "], mw))
            lines.append(_row([" " * 18, f" {'0MiB / 32767MiB':>{mw[1] - 2}} ", " " * 11, " " * 23], mw))
            lines.append(_rule(mw))
    if with_processes:
        lines.append(" " * layout.width)
        lines.append("+" + "-" * inner + "+")
        lines.append("|" + " Processes:".ljust(inner) + "|")
        if layout.mig_row:
            lines.append("|" + "  GPU   GI   CI        PID   Type   Process name".ljust(inner - 11) + "GPU Memory |")
            lines.append("|" + "        ID   ID".ljust(inner - 11) + "Usage      |")
        else:
            lines.append("|" + "  GPU       PID   Type   Process name".ljust(inner - 11) + "GPU Memory |")
        lines.append("|" + "=" * inner + "|")
        busy = [card for card in cards if card.used > 0 and memory_shown(layout, card)]
        if not busy:
            lines.append("|" + "  No running processes found".ljust(inner) + "|")
        for card in busy:
            gici = "   N/A  N/A" if layout.mig_row else ""
            start = f"  {card.index:>3}{gici}     {4242:>5}      C   python"
            lines.append("|" + start.ljust(inner - 11) + f"{str(card.used) + 'MiB':>9}  |")
        lines.append("+" + "-" * inner + "+")
    for line in lines[1:]:
        assert len(line) == layout.width or not line.strip("| +-="), (layout.key, len(line), line)
    return "\n".join(lines) + "\n"


def collapse(text: str) -> str:
    return "\n".join(re.sub(r"\s+", " ", line).strip() for line in text.splitlines()) + "\n"


def indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines()) + "\n"


def wrap(text: str, columns: int = 80) -> str:
    out = []
    for line in text.splitlines():
        while len(line) > columns:
            out.append(line[:columns])
            line = line[columns:]
        out.append(line)
    return "\n".join(out) + "\n"
