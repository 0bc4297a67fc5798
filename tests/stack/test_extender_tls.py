"""Only kube-scheduler may call the extender: mutual TLS with the certificates the
providers make (gpushare_stack/extender/tls.py, fixtures/providers/extender_tls.py).

Real sockets and real certificates (openssl), a server on 127.0.0.1: the scheduler's
client pair is served; a client without a certificate, with a certificate of another
CA or with the extender's own serving certificate fails the handshake and binds
nothing; the kubelet's probe (no certificate) reads /healthz on the plain health
listener, which serves nothing else.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
from pathlib import Path

import pytest
import yaml
from test_extender_robustness import post, raw_request, serve

from gpushare_conformance.fixtures.providers.extender_tls import (
    ExtenderPki,
    ExtenderTlsError,
    ensure_extender_pki,
    render_scheduler_config,
    secret_manifest,
)
from gpushare_stack.extender import __main__ as extender_main
from gpushare_stack.extender.tls import server_context

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_CONFIG = REPO / "manifests" / "scheduler" / "scheduler-config.yaml"
BIND = {"PodName": "victim", "PodNamespace": "other-team", "PodUID": "u-1", "Node": "gpu-a"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> ExtenderPki:
    return ensure_extender_pki(tmp_path_factory.mktemp("extender-pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory) -> ExtenderPki:
    """A second, unrelated set: its scheduler certificate is signed by another CA."""
    return ensure_extender_pki(tmp_path_factory.mktemp("other-pki"))


@pytest.fixture
def tls_extender(pki):
    context = server_context(pki.server_cert, pki.server_key, pki.ca)
    yield from serve(tls=context, health_address=("127.0.0.1", 0))


def client_context(pki: ExtenderPki, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def call(port: int, context: ssl.SSLContext, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def test_the_schedulers_client_certificate_is_served(tls_extender, pki):
    server, port = tls_extender
    context = client_context(pki, pki.client_cert, pki.client_key)
    status, body = call(port, context, "POST", "/gpushare-scheduler/bind", BIND)
    assert status == 200 and not body.get("Error"), body
    assert server.binder.calls == [("other-team", "victim", "u-1", "gpu-a")]


def test_a_client_without_a_certificate_is_refused_by_the_handshake_and_binds_nothing(tls_extender, pki):
    server, port = tls_extender
    context = client_context(pki, None, None)
    for verb in ("bind", "filter", "prioritize"):
        # TLS 1.3: the client's side of the handshake is done before the server reads its
        # (missing) certificate, so the refusal shows on the first read: an alert or EOF.
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
            call(port, context, "POST", f"/gpushare-scheduler/{verb}", BIND)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        call(port, context, "GET", "/healthz")
    assert server.binder.calls == []


def test_the_probe_reads_healthz_without_a_certificate_on_the_health_port_and_no_verb(tls_extender, pki):
    server, _ = tls_extender
    health = server.health_address[1]
    status, body = raw_request(health, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, body) == (200, {"synced": True})
    for verb in ("bind", "filter", "prioritize"):
        status, body = post(health, verb, json.dumps(BIND).encode())
        assert status == 404 and "serves /healthz and inspect only" in body["error"], body
    # The view, to a trusted client (here loopback, the node's own processes), as on the main port.
    status, body = raw_request(health, b"GET /gpushare-scheduler/inspect HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and "nodes" in body, body
    assert server.binder.calls == []


def test_the_health_port_keeps_the_view_from_untrusted_clients(pki):
    context = server_context(pki.server_cert, pki.server_key, pki.ca)
    for server, _ in serve(tls=context, health_address=("127.0.0.1", 0), trusted_clients=("10.255.255.0/24",)):
        health = server.health_address[1]
        status, body = raw_request(health, b"GET /gpushare-scheduler/inspect HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 403 and "trusted clients only" in body["error"], body


@pytest.mark.parametrize("which", ["another CA's client certificate", "the extender's own serving certificate"])
def test_a_certificate_the_client_ca_did_not_sign_for_clients_fails_the_handshake(tls_extender, pki, other_pki, which):
    server, port = tls_extender
    if which.startswith("another"):
        cert, key = other_pki.client_cert, other_pki.client_key
    else:
        cert, key = pki.server_cert, pki.server_key  # signed by the right CA, but for serverAuth only
    context = client_context(pki, cert, key)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        call(port, context, "POST", "/gpushare-scheduler/bind", BIND)
    assert server.binder.calls == []


def test_plain_http_to_the_tls_port_binds_nothing(tls_extender):
    server, port = tls_extender
    with pytest.raises(AssertionError, match="closed without an answer"):
        post(port, "bind", json.dumps(BIND).encode())
    assert server.binder.calls == []


def test_a_client_that_never_finishes_the_handshake_is_dropped_at_the_deadline(pki):
    context = server_context(pki.server_cert, pki.server_key, pki.ca)
    for _server, port in serve(tls=context, deadline_s=1.0):
        stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        try:
            # Clients that send nothing never keep the scheduler waiting...
            scheduler = client_context(pki, pki.client_cert, pki.client_key)
            assert call(port, scheduler, "POST", "/gpushare-scheduler/bind", BIND)[0] == 200
            # ...and are dropped once the handshake's deadline is past.
            time.sleep(1.5)
            for sock in stalled:
                sock.settimeout(10)  # a loaded server may drop them a while after the deadline
                assert sock.recv(100) == b""
        finally:
            for sock in stalled:
                sock.close()


def test_the_scheduler_config_carries_the_ca_and_the_client_pair(pki):
    config = yaml.safe_load(render_scheduler_config(SCHEDULER_CONFIG, "/etc/kubernetes/scheduler.conf", pki))
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:32766/gpushare-scheduler"
    assert extender["enableHTTPS"] is True
    tls = extender["tlsConfig"]
    assert base64.b64decode(tls["caData"]) == pki.ca.read_bytes()
    assert base64.b64decode(tls["certData"]) == pki.client_cert.read_bytes()
    assert base64.b64decode(tls["keyData"]) == pki.client_key.read_bytes()
    assert "insecure" not in tls
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_a_tls_scheduler_config_without_certificates_is_an_error(tmp_path):
    with pytest.raises(ExtenderTlsError, match="mutual TLS"):
        render_scheduler_config(SCHEDULER_CONFIG, "/k", None)
    with pytest.raises(ExtenderTlsError, match="mutual TLS"):
        render_scheduler_config(SCHEDULER_CONFIG, "/k", ExtenderPki(tmp_path))


def test_the_secret_holds_the_serving_pair_and_the_client_ca(pki):
    secret = secret_manifest(pki)
    assert secret["metadata"] == {
        "name": "gpushare-extender-tls",
        "namespace": "gpushare-system",
        "labels": {"app": "gpushare-extender"},
    }
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data == {
        "tls.crt": pki.server_cert.read_bytes(),
        "tls.key": pki.server_key.read_bytes(),
        "ca.crt": pki.ca.read_bytes(),
    }


def test_the_pki_is_made_once_and_its_keys_are_private(pki):
    before = pki.client_cert.read_bytes()
    again = ensure_extender_pki(pki.directory)
    assert again.client_cert.read_bytes() == before
    assert {p.name: p.stat().st_mode & 0o777 for p in pki.directory.glob("*.key")} == {
        "ca.key": 0o600,
        "extender.key": 0o600,
        "scheduler.key": 0o600,
    }


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--tls-cert-file", "/nonexistent.crt"],
            "--tls-private-key-file, --client-ca-file: required with --tls-cert-file",
        ),
        (["--client-ca-file", "/x"], "--tls-cert-file, --tls-private-key-file: required with --client-ca-file"),
        (
            ["--tls-cert-file", "/nonexistent.crt", "--tls-private-key-file", "/k", "--client-ca-file", "/c"],
            "--tls-cert-file: '/nonexistent.crt' is not a readable file",
        ),
    ],
)
def test_tls_options_name_what_is_wrong(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_info:
        extender_main.main(argv)
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err


def test_a_key_that_does_not_match_the_certificate_is_named(capsys, pki, other_pki):
    argv = ["--tls-cert-file", str(pki.server_cert), "--tls-private-key-file", str(other_pki.server_key)]
    with pytest.raises(SystemExit):
        extender_main.main([*argv, "--client-ca-file", str(pki.ca)])
    assert "not a matching PEM certificate and key" in capsys.readouterr().err
