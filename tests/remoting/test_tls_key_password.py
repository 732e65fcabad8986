"""A key password keeps the blanks around it (found by a review; failed before): RocketMQ's
TlsHelper.extractTlsConfigFromFile reads ``tls.server.keyPassword`` with Properties.getProperty, which keeps a
value's trailing blanks (and an escaped leading one), so a key encrypted with such a password loads in Java."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import NameOID

from client.config import ClientConfig
from remoting.client import RemotingClient
from remoting.codec.command import request
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.server import RemotingServer, ServerConfig
from remoting.tls import ENFORCING, TlsSettings, client_context, self_signed_pem, server_context, tls_settings_of
from tests.remoting.helpers import EchoProcessor


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


async def test_our_client_presents_a_certificate_whose_key_is_encrypted_with_its_password(tmp_path: Path) -> None:
    """Java's client reads ``tls.client.keyPassword`` (TlsSystemConfig) for an encrypted ``tls.client.keyPath``; our
    ClientConfig had no password, so an encrypted client key could not be used (found by a review)."""
    ca = trustme.CA()
    server_cert, client_cert = ca.issue_cert("127.0.0.1"), ca.issue_cert("client")
    for name, issued in (("server", server_cert), ("client", client_cert)):
        issued.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}.pem"))
        issued.private_key_pem.write_to_path(str(tmp_path / f"{name}.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    key = serialization.load_pem_private_key((tmp_path / "client.key").read_bytes(), None)
    locked = serialization.BestAvailableEncryption(b"client pw")
    (tmp_path / "client.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, locked)
    )
    settings = TlsSettings(
        tls_test_mode_enable=False, tls_config_file=str(tmp_path / "none"),
        tls_server_cert_path=str(tmp_path / "server.pem"), tls_server_key_path=str(tmp_path / "server.key"),
        tls_server_auth_client=True, tls_server_need_client_auth="require",
        tls_server_trust_cert_path=str(tmp_path / "ca.pem"),
    )  # fmt: skip
    config = ClientConfig(
        namesrv_addr="127.0.0.1:1", tls=True, tls_ca_file=str(tmp_path / "ca.pem"),
        tls_cert_file=str(tmp_path / "client.pem"), tls_key_file=str(tmp_path / "client.key"),
        tls_key_password="client pw",
    )  # fmt: skip
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 1, 10))
    server = RemotingServer(dispatcher, ServerConfig(tls_mode=ENFORCING, ssl_context=lambda: server_context(settings)))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        async with RemotingClient(ssl_context=config.ssl_context()) as client:
            answer = await client.invoke(f"{host}:{port}", request(1000, {}, b"signed in"), 5)
        assert bytes(answer.body) == b"signed in"
        nursery.cancel_scope.cancel()


async def test_a_wrong_key_password_stops_the_start_naming_the_key_file(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Netty refuses the key (IllegalArgumentException "Input stream does not contain valid private key"), which
    escapes 4.9.8's NettyRemotingServer constructor and stops the start. Ours stopped with OpenSSL's bare "[SSL] PEM
    lib (_ssl.c:...)", naming neither the file nor the password."""
    settings = _write(tmp_path, b"right", "wrong")
    server = RemotingServer(
        Dispatcher(), ServerConfig(tls_mode=ENFORCING, ssl_context=lambda: server_context(settings))
    )
    with pytest.raises(ValueError, match="TLS context") as raised:
        await nursery.start(server.serve, "127.0.0.1", 0)
    assert str(tmp_path / "key.pem") in str(raised.value) and "password" in str(raised.value)


#: An EC key encrypted with password ``123456`` as RocketMQ's TLS guide encrypts keys (docs/en/Configuration_TLS.md,
#: 4.9.8: ``openssl pkcs8 -topk8 -v1 PBE-SHA1-RC4-128``), the format a ``tls.server.keyPassword`` is usually for.
GUIDE_KEY = b"""-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGrMBwGCiqGSIb3DQEMAQEwDgQI+ZNuyIZaP9wCAggABIGKpiq9L4Qft/+/7d/1
Xutry1eJ1/2j+NZFZJsEJ7FN08CKOfaC9NbWfO3wn23SX8wGzm+vh0R/gtNciK7F
mU00V1kVGK3keiJNqL/YSAADSq8iBA0whjiq94mVlBGuohiQUhEC3JRX2Rzs3ig5
4fgltNvcPqQL5ZZOfU2WXfHNBCieCS/ku+6CiwZf
-----END ENCRYPTED PRIVATE KEY-----
"""


def _certificate_for(key: PrivateKeyTypes) -> bytes:
    """A self-signed certificate for ``key`` (the test's, not what is tested)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


async def test_a_key_encrypted_as_rocketmqs_tls_guide_says_loads_with_its_password(tmp_path: Path) -> None:
    """Netty reads an encrypted PKCS#8 key through the JDK (``EncryptedPrivateKeyInfo``, ``PBEWithSHA1AndRC4_128``),
    so a key made as RocketMQ's guide makes it serves. Before: OpenSSL 3 has no RC4 without its legacy provider, so
    the start stopped with "do not load as a certificate and its key" for a key and password that are right."""
    key_path, cert_path = tmp_path / "server.key", tmp_path / "server.pem"
    key_path.write_bytes(GUIDE_KEY)
    cert_path.write_bytes(_certificate_for(serialization.load_pem_private_key(GUIDE_KEY, b"123456")))
    settings = TlsSettings(
        tls_test_mode_enable=False,
        tls_server_cert_path=str(cert_path),
        tls_server_key_path=str(key_path),
        tls_server_key_password="123456",
        tls_config_file=str(tmp_path / "absent.properties"),
    )
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 1, 10))
    server = RemotingServer(dispatcher, ServerConfig(tls_mode=ENFORCING, ssl_context=lambda: server_context(settings)))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        async with RemotingClient(ssl_context=client_context()) as client:
            answer = await client.invoke(f"{host}:{port}", request(1000, {}, b"guide key"), 5)
        assert bytes(answer.body) == b"guide key"
        nursery.cancel_scope.cancel()
