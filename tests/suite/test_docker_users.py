"""Docker shared by the test command's two kind clusters (tests/docker_users.py): the
first user starts it when it is stopped, the last stops it only when it was started
there, and a user that died no longer counts. ci/docker-service.sh is replaced by a
recorder; the state file lives in the test's directory."""

from __future__ import annotations

import json
import subprocess

import docker_users
import pytest


@pytest.fixture
def service(tmp_path, monkeypatch):
    calls: list[str] = []
    status = {"now": "stopped"}

    def fake(action: str) -> subprocess.CompletedProcess:
        calls.append(action)
        if action == "start":
            status["now"] = "running"
        elif action == "stop":
            status["now"] = "stopped"
        out = status["now"] if action == "status" else ""
        return subprocess.CompletedProcess(["docker-service.sh", action], 0, out + "\n", "")

    monkeypatch.setattr(docker_users, "STATE", tmp_path / "docker-users.json")
    monkeypatch.setattr(docker_users, "_service", fake)
    return calls, status


def test_the_first_user_starts_docker_and_the_last_stops_it(service):
    calls, status = service
    with docker_users.docker_in_use():
        assert calls == ["status", "start"]
        with docker_users.docker_in_use():  # a second user (the other stream)
            assert calls == ["status", "start"]
        assert status["now"] == "running", "stopped while a user was left"
    assert calls == ["status", "start", "stop"] and status["now"] == "stopped"


def test_docker_running_before_is_left_running(service):
    calls, status = service
    status["now"] = "running"
    with docker_users.docker_in_use():
        pass
    assert calls == ["status"] and status["now"] == "running"


def test_a_user_that_died_does_not_count(service):
    calls, status = service
    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    docker_users.STATE.write_text(json.dumps({"started": True, "users": [[gone.pid, "its-token"]]}))
    status["now"] = "running"  # left running by the user that died
    with docker_users.docker_in_use():
        assert calls == ["status"], "a dead user's count kept the new one from asking"
    assert calls == ["status"], "docker started by no live user was stopped"
