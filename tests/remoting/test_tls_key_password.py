"""A key password keeps the blanks around it (found by a review; failed before): RocketMQ's
TlsHelper.extractTlsConfigFromFile reads ``tls.server.keyPassword`` with Properties.getProperty, which keeps a
value's trailing blanks (and an escaped leading one), so a key encrypted with such a password loads in Java."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from remoting.tls import TlsSettings, self_signed_pem, server_context, tls_settings_of


def _write(tmp_path: Path, password: bytes, written: str) -> TlsSettings:
    cert_pem, key_pem = self_signed_pem()
    key = serialization.load_pem_private_key(key_pem, None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    (tmp_path / "key.pem").write_bytes(encrypted)
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    conf = tmp_path / "tls.properties"
    conf.write_text(
        "tls.test.mode.enable=false\n"
        f"tls.server.keyPath={tmp_path / 'key.pem'}\n"
        f"tls.server.certPath={tmp_path / 'cert.pem'}\n"
        f"tls.server.keyPassword={written}\n"
    )
    return TlsSettings(tls_config_file=str(conf))


def test_a_key_password_with_a_trailing_blank_is_kept(tmp_path: Path) -> None:
    settings = _write(tmp_path, b"secret ", "secret ")
    assert tls_settings_of(settings).tls_server_key_password == "secret "
    server_context(settings)  # ssl.SSLError: bad decrypt


def test_a_key_password_with_an_escaped_leading_blank_is_kept(tmp_path: Path) -> None:
    settings = _write(tmp_path, b" secret", "\\ secret")
    assert tls_settings_of(settings).tls_server_key_password == " secret"


#: Loads an encrypted key without its password in a child with no terminal, ``pw`` waiting on its standard input.
_LOAD_WITHOUT_PASSWORD = {
    "server": "server_context(TlsSettings(tls_config_file=conf))",
    "broker client": "settings_client_context(TlsSettings(tls_config_file=conf), use_tls=True)",
    "client": "ClientConfig(tls=True, tls_cert_file=cert, tls_key_file=key, namesrv_addr='h:1').ssl_context()",
}


@pytest.mark.parametrize("side", list(_LOAD_WITHOUT_PASSWORD))
def test_an_encrypted_key_without_its_password_fails_without_asking_a_terminal(tmp_path: Path, side: str) -> None:
    """RocketMQ's TlsHelper hands the key and a null password to Netty, which fails (the server's context, or the
    start); OpenSSL's default instead prompts "Enter PEM pass phrase:" on the terminal, else reads standard input:
    a broker, name server or client started from a shell hung there, with its event loop blocked (found by a
    review)."""
    settings = _write(tmp_path, b"pw", "")
    conf = Path(settings.tls_config_file)
    server_lines = conf.read_text()
    conf.write_text(server_lines + server_lines.replace("tls.server.", "tls.client."))  # no password either side
    code = (
        "import ssl, sys\n"
        "from client.config import ClientConfig\n"
        "from remoting.tls import TlsSettings, server_context, settings_client_context\n"
        f"conf, cert, key = {str(conf)!r}, {str(tmp_path / 'cert.pem')!r}, {str(tmp_path / 'key.pem')!r}\n"
        "try:\n"
        f"    {_LOAD_WITHOUT_PASSWORD[side]}\n"
        "except ssl.SSLError as exc:\n"
        "    sys.exit(f'refused: {exc}')\n"
        "print('loaded')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=b"pw\n", capture_output=True, start_new_session=True, timeout=120
    )
    assert b"pass phrase" not in done.stderr
    assert done.stdout == b"" and done.stderr.startswith(b"refused: ")
