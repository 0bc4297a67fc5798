"""Mutual TLS for the extender: only kube-scheduler, holding a client certificate that
the extender's client CA signed, may call its verbs.

kube-scheduler's extender configuration (``enableHTTPS: true`` and ``tlsConfig`` with
the CA that signed the extender's serving certificate, and its own client certificate
and key) is the one caller the extender serves. The handshake *requires* a client
certificate the client CA signed for client authentication: any other client (none
sent, another CA, a server certificate) fails the handshake before a byte of HTTP is
read (it reads EOF: asyncio does not flush the alert). The kubelet's probes, which never send a certificate, read ``/healthz``
on the extender's plain health listener instead. The listening address and the
network policy stay a second line, not the first.
"""

from __future__ import annotations

import ssl
from pathlib import Path


class TlsConfigError(ValueError):
    """A TLS file the extender was given cannot be used (the message names the option)."""


def server_context(cert_file: str | Path, key_file: str | Path, client_ca_file: str | Path) -> ssl.SSLContext:
    """A TLS 1.2+ server context that verifies client certificates against ``client_ca_file``."""
    for option, path in (
        ("--tls-cert-file", cert_file),
        ("--tls-private-key-file", key_file),
        ("--client-ca-file", client_ca_file),
    ):
        if not Path(path).is_file():
            raise TlsConfigError(f"{option}: {str(path)!r} is not a readable file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert_file), str(key_file))
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(
            f"--tls-cert-file {str(cert_file)!r} / --tls-private-key-file {str(key_file)!r}: not a matching "
            f"PEM certificate and key: {exc}"
        ) from None
    try:
        context.load_verify_locations(cafile=str(client_ca_file))
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"--client-ca-file {str(client_ca_file)!r}: not a PEM CA certificate: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context
