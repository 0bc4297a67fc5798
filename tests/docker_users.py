"""Docker for the test command's kind clusters (tests/kind, tests/peers), which run at
once on two pytest-xdist workers: ``ci/docker-service.sh`` starts it for the first user
when it is stopped and stops it after the last one when it was started here, and then
nothing of it may be left. The users are uses (a process and a token: one process may
hold two), kept in a file under a lock; a use whose process died without saying so no
longer counts. Docker that cannot be started is a
failure, not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from gpushare_conformance.fixtures.framework.placement import pid_alive

REPO = Path(__file__).resolve().parents[1]
STATE = Path("/run/gpushare-conformance/docker-users.json")


def _service(action: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "ci/docker-service.sh", action], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def _read() -> dict:
    try:
        state = json.loads(STATE.read_text())
    except (OSError, ValueError):
        state = {}
    # A user is [pid, token]: one process may use Docker twice at once (tests/kind's module
    # and tests/peers' session in one pytest process), each use leaving on its own.
    users = [u for u in state.get("users", []) if isinstance(u, list) and len(u) == 2 and pid_alive(u[0])]
    return {"started": bool(state.get("started")), "users": users}


def _write(state: dict) -> None:
    STATE.write_text(json.dumps(state))


@contextmanager
def docker_in_use() -> Iterator[None]:
    """Within, Docker runs (started if it was stopped and no one else uses it)."""
    STATE.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(STATE.with_suffix(".lock")))
    me = [os.getpid(), uuid.uuid4().hex]
    with lock:
        state = _read()
        if not state["users"]:
            state["started"] = _service("status").stdout.strip() == "stopped"
            if state["started"]:
                result = _service("start")
                assert result.returncode == 0, f"ci/docker-service.sh start failed:\n{result.stderr}"
        state["users"].append(me)
        _write(state)
    try:
        yield
    finally:
        with lock:
            state = _read()
            state["users"] = [u for u in state["users"] if u != me]
            stop = not state["users"] and state["started"]
            if stop:
                state["started"] = False
            _write(state)
            if stop:
                result = _service("stop")
                assert result.returncode == 0, f"ci/docker-service.sh stop left something behind:\n{result.stderr}"
