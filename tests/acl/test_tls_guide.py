"""RocketMQ's TLS guide end to end (4.9.8's docs/en/Configuration_TLS.md): keys encrypted with ``openssl pkcs8 -topk8
-v1 PBE-SHA1-RC4-128`` and password 123456, a ``tls.properties`` with ``tls.server.need.client.auth=require`` and
``tls.server.authClient=false`` and the client part, the name server ``enforcing``, the broker with ``tls.enable``,
and a client with ``-Dtls.client.authServer=true -Dtls.enable=true -Dtls.test.mode.enable=false -Dtls.config.file=``
(environment variables here). Three reviews' findings at once: the key did not load, a client without a certificate
was served, and the client read neither its properties nor its file."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MQClientError
from tests.conftest import SMALL_STORE
from tests.remoting.test_tls_key_password import GUIDE_KEY

PASSWORD = b"123456"


def _issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None, signer: object) -> bytes:
    """A certificate for ``key`` named ``subject``, signed by ``signer`` (``issuer``'s key; self-signed without)."""
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _guide_files(directory: Path) -> dict[str, Path]:
    """ca.pem, server.pem/server.key and client.pem/client.key as the guide makes them (one key for both here)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_pem = _issue("rocketmq test ca", ca_key, None, ca_key)
    ca = x509.load_pem_x509_certificate(ca_pem)
    key = serialization.load_pem_private_key(GUIDE_KEY, PASSWORD)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    files = {name: directory / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}
    files["ca.pem"].write_bytes(ca_pem)
    for side in ("server", "client"):
        files[f"{side}.pem"].write_bytes(_issue(f"rocketmq {side}", key, ca, ca_key))
        files[f"{side}.key"].write_bytes(GUIDE_KEY)
    return files


async def test_rocketmqs_tls_guide_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _guide_files(tmp_path)
    client_part = (
        f"tls.client.keyPath={files['client.key']}\ntls.client.keyPassword=123456\n"
        f"tls.client.certPath={files['client.pem']}\ntls.client.trustCertPath={files['ca.pem']}\n"
    )
    tls_properties = tmp_path / "tls.properties"
    tls_properties.write_text(
        "tls.test.mode.enable=false\ntls.server.need.client.auth=require\n"
        f"tls.server.keyPath={files['server.key']}\ntls.server.keyPassword=123456\n"
        f"tls.server.certPath={files['server.pem']}\ntls.server.authClient=false\n"
        f"tls.server.trustCertPath={files['ca.pem']}\n{client_part}tls.client.authServer=false\n"
    )
    tls_client = tmp_path / "tlsclient.properties"
    tls_client.write_text(client_part)
    overrides = {"tls_server_mode": "enforcing", "tls_config_file": str(tls_properties), "tls_enable": True}
    async with EmbeddedCluster(tmp_path / "c", **overrides, **SMALL_STORE) as cluster:
        for name, value in {"TLS_CLIENT_AUTH_SERVER": "true", "TLS_ENABLE": "true", "TLS_TEST_MODE_ENABLE": "false",
                            "TLS_CONFIG_FILE": str(tls_client)}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr)
        async with Admin(config=config) as admin:
            await admin.create_topic("TlsGuide", read_queue_nums=1, write_queue_nums=1)
        async with Producer("PG-tls-guide", config=config) as producer:
            assert (await producer.send(Message("TlsGuide", b"as the guide says"))).msg_id
        # Without the client part (test mode, Java's default): no certificate, refused by need.client.auth=require.
        monkeypatch.setenv("TLS_TEST_MODE_ENABLE", "true")
        async with Admin(config=ClientConfig(namesrv_addr=cluster.namesrv_addr)) as admin:
            with pytest.raises(MQClientError):
                await admin.cluster_info()
