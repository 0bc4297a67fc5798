"""The one error every evidence parser raises.

A parser that cannot read its input must say so loudly: returning an empty list would
read as "the pod saw no GPUs", which is a verdict, not a parse failure.
"""

from __future__ import annotations


class EvidenceParseError(ValueError):
    """Input that is not the expected tool output.

    `line_number` is 1-based (None when the problem is the input as a whole) and
    `line` is the text of that line, so the message shows where parsing stopped.
    """

    def __init__(self, message: str, line_number: int | None = None, line: str | None = None):
        self.message = message
        self.line_number = line_number
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        if self.line_number is None:
            return self.message
        shown = (self.line or "").strip()
        if len(shown) > 120:
            shown = shown[:117] + "..."
        return f"{self.message} (line {self.line_number}: {shown!r})"
