"""The local cluster's certificates carry what TLS clients check."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpushare_conformance.fixtures.providers.local.pki import ensure_pki, write_kubeconfig


def _text(cert: Path) -> str:
    return subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-text"], stdout=subprocess.PIPE, text=True, check=True
    ).stdout


def test_apiserver_certificate_names_every_address(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "192.0.2.10", "node-a", "10.96.0.1")
    text = _text(pki / "apiserver.crt")
    for name in (
        "IP Address:192.0.2.10",
        "IP Address:10.96.0.1",
        "IP Address:127.0.0.1",
        "DNS:kubernetes.default.svc",
        "DNS:node-a",
    ):
        assert name in text
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(pki / "ca.crt"), str(pki / "apiserver.crt"), str(pki / "admin.crt")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout
    assert "O = system:masters" in _text(pki / "admin.crt")


def test_certificates_are_reused_until_the_address_changes(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "192.0.2.10", "node-a", "10.96.0.1")
    first = (pki / "ca.crt").read_bytes()
    ensure_pki(pki, "192.0.2.10", "node-a", "10.96.0.1")
    assert (pki / "ca.crt").read_bytes() == first
    ensure_pki(pki, "192.0.2.11", "node-a", "10.96.0.1")
    assert (pki / "ca.crt").read_bytes() != first
    assert "IP Address:192.0.2.11" in _text(pki / "apiserver.crt")


def test_kubeconfig_points_at_the_admin_certificate(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "192.0.2.10", "node-a", "10.96.0.1")
    config = write_kubeconfig(tmp_path / "kubeconfig", pki, "https://127.0.0.1:6443").read_text()
    assert f"client-certificate: {pki / 'admin.crt'}" in config
    assert "server: https://127.0.0.1:6443" in config
