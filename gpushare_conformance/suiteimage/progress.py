"""pytest plugin of the suite image: the progress lines hydrophone reads.

hydrophone counts progress in ``e2e.log`` from ``Will run N of M specs`` and one ``•``
per finished spec (it stops if the log has text but no such line), and it stops
following the container's log once ``Ginkgo ran 1 suite`` appears in its last lines;
the entrypoint (``run.py``) writes that last line, this plugin the others.
"""

from __future__ import annotations

import pytest

SPEC_DONE = "\u2022"


class Progress:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.deselected = 0

    def _say(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        chosen = len(session.items)
        self._say(f"Will run {chosen} of {chosen + self.deselected} specs")

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple) -> None:
        self._say(f"{SPEC_DONE} {nodeid}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Progress(config), "gpushare-suite-image-progress")
