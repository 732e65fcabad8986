"""A key password keeps the blanks around it (found by a review; failed before): RocketMQ's
TlsHelper.extractTlsConfigFromFile reads ``tls.server.keyPassword`` with Properties.getProperty, which keeps a
value's trailing blanks (and an escaped leading one), so a key encrypted with such a password loads in Java."""

from __future__ import annotations

from pathlib import Path

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
