"""TLS with RocketMQ's settings (``remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsSystemConfig.java``,
``TlsHelper.java``): the ``tls.*`` names, the server modes, and the SSL contexts of the server and the client.

:class:`TlsSettings` holds every ``tls.*`` property; the broker's and the name server's settings classes inherit it, so
``-c file`` and ``--tls.server.mode enforcing`` set them like any property. ``tls.config.file`` (a properties file)
overrides everything except ``tls.server.mode`` and ``tls.enable`` when a context is built, as in RocketMQ.

Server modes (``tls.server.mode``; an unknown value is ``permissive``, RocketMQ's default): the server looks at the
first byte of each connection (:mod:`remoting.server`); ``0x16`` (a TLS handshake record) is served over TLS unless the
mode is ``disabled``, which closes it; any other byte is served in plaintext unless the mode is ``enforcing``, which
closes it.

Contexts: :func:`server_context` uses the PEM certificate and key files, or, with ``tls.test.mode.enable`` (RocketMQ's
default), a self-signed certificate generated in memory with ``cryptography`` (written to a private temporary
directory only for the moment ``ssl`` loads it). With ``tls.server.authClient`` it asks for client certificates as
``tls.server.need.client.auth`` says, checked against ``tls.server.trustCertPath`` or, without one, the platform's
default CAs, as TlsHelper does (without ``authClient`` RocketMQ asks too and accepts any certificate; Python's ``ssl``
cannot, so ``require`` checks it as with ``authClient``, refusing a client without one as Java does, and ``optional``
asks for none). :func:`client_context` encrypts without checking the server when no CA file is given
(RocketMQ's test-mode client), and checks the chain and the host name against a CA file otherwise, or against the
default CAs (``tls.client.authServer`` without ``tls.client.trustCertPath``); the broker's context towards its name
servers (:func:`settings_client_context`) checks the chain only, as RocketMQ's client.
Errors: ``OSError`` / ``ssl.SSLError`` for unreadable or mismatched certificate files (an encrypted key without its
password too, never a prompt: :func:`load_key_pair`; :class:`TlsFileUnopenable` for a server's certificate or key
file that cannot be opened, which a starting server survives, :func:`fatal_at_start`), except a client certificate
or key file a client cannot open (:func:`client_key_files_open`, used by :func:`settings_client_context` and the
client's ``ClientConfig.ssl_context``): logged, and no context (plaintext), as RocketMQ's client.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import logging
import re
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs

from remoting.codec.java_properties import (
    UnreadableProperties,
    apply_properties,
    decode_properties_file,
    parse_properties,
)

DISABLED: Final = "disabled"
PERMISSIVE: Final = "permissive"
ENFORCING: Final = "enforcing"
#: The first byte of a TLS connection (a handshake record).
TLS_HANDSHAKE: Final = 0x16

#: Settings RocketMQ reads as JVM system properties (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
#: TlsSystemConfig.java), not fields of the config objects (NamesrvConfig, BrokerConfig, NettyServerConfig,
#: NettyClientConfig, MessageStoreConfig). UPDATE_NAMESRV_CONFIG and UPDATE_BROKER_CONFIG ignore them, so an
#: unauthenticated update cannot switch TLS off for the next start (ours: 4.9.8's Configuration.update, through
#: mergeIfExist, changes and persists one the -c file held).
SYSTEM_PROPERTY_PREFIX: Final = "tls."

log = logging.getLogger(__name__)


class TlsFileUnopenable(OSError):
    """A certificate or key file a server names cannot be opened (Java's IOException: logged, TLS refused)."""


class TlsContextError(ValueError):
    """The server's TLS context cannot be built at start for a reason Java does not survive either."""


def fatal_at_start(exc: Exception) -> bool:
    """Whether a server's context failure stops its start, as in RocketMQ 4.9.8: NettyRemotingServer.loadSslContext
    logs an IOException (a file it cannot open, or a certificate and key that do not match, which Netty's OpenSSL
    context reports so) and the broker or name server goes on; Netty's IllegalArgumentException (a file that does not
    parse, a wrong key password, a trust file it cannot read) or NullPointerException (no certificate named) escapes
    the constructor and stops the start."""
    mismatch = getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH"  # an SSLError we raise has no reason
    return not (isinstance(exc, TlsFileUnopenable) or mismatch)


def sniff(first: int, mode: str) -> tuple[bool, str | None]:
    """How a connection whose first byte is ``first`` is served under ``mode`` (one of the three names): ``(over
    TLS, None)``, or ``(over TLS, why it is refused)`` when the mode closes it. Used by every sniffing listener
    (:mod:`remoting.server`, the gRPC front in ``proxy/front.py``)."""
    if first == TLS_HANDSHAKE:
        return True, ("a TLS handshake while tls.server.mode is disabled" if mode == DISABLED else None)
    return False, ("plaintext while tls.server.mode is enforcing" if mode == ENFORCING else None)


def tls_mode(text: str) -> str:
    """One of the three names, else ``permissive``, as RocketMQ's ``TlsMode.parse``
    (remoting/src/main/java/org/apache/rocketmq/remoting/common/TlsMode.java), except that ours takes any case and
    blanks around it: Java compares exactly, so ``ENFORCING`` is permissive there and enforcing here (the stricter
    reading)."""
    lowered = text.strip().lower()
    return lowered if lowered in (DISABLED, PERMISSIVE, ENFORCING) else PERMISSIVE


@attrs.frozen
class TlsSettings:
    """Every ``tls.*`` setting, with RocketMQ's names and defaults."""

    tls_server_mode: str = attrs.field(default=PERMISSIVE, metadata={"key": "tls.server.mode"})
    #: Client side: connect with TLS (the broker towards its name servers, unless broker.conf sets ``useTLS``); None
    #: (not set): only when the server mode is enforcing, as BrokerStartup's ``System.getProperty(TLS_ENABLE,
    #: String.valueOf(tlsMode == ENFORCING))``. Decided in ``broker.security.client_use_tls`` alone.
    tls_enable: bool | None = attrs.field(default=None, metadata={"key": "tls.enable"})
    tls_config_file: str = attrs.field(default="/etc/rocketmq/tls.properties", metadata={"key": "tls.config.file"})
    tls_test_mode_enable: bool = attrs.field(default=True, metadata={"key": "tls.test.mode.enable"})
    tls_server_need_client_auth: str = attrs.field(default="none", metadata={"key": "tls.server.need.client.auth"})
    tls_server_key_path: str = attrs.field(default="", metadata={"key": "tls.server.keyPath"})
    tls_server_key_password: str = attrs.field(
        default="", repr=False, metadata={"key": "tls.server.keyPassword", "secret": True}
    )
    tls_server_cert_path: str = attrs.field(default="", metadata={"key": "tls.server.certPath"})
    tls_server_trust_cert_path: str = attrs.field(default="", metadata={"key": "tls.server.trustCertPath"})
    tls_server_auth_client: bool = attrs.field(default=False, metadata={"key": "tls.server.authClient"})
    tls_client_key_path: str = attrs.field(default="", metadata={"key": "tls.client.keyPath"})
    tls_client_key_password: str = attrs.field(
        default="", repr=False, metadata={"key": "tls.client.keyPassword", "secret": True}
    )
    tls_client_cert_path: str = attrs.field(default="", metadata={"key": "tls.client.certPath"})
    tls_client_trust_cert_path: str = attrs.field(default="", metadata={"key": "tls.client.trustCertPath"})
    tls_client_auth_server: bool = attrs.field(default=False, metadata={"key": "tls.client.authServer"})


#: The key passwords among the ``tls.*`` keys: written back to a settings file that held them, never shown.
SECRET_KEYS: Final = frozenset(str(f.metadata["key"]) for f in attrs.fields(TlsSettings) if f.metadata.get("secret"))


def tls_properties_in(path: Path) -> dict[str, str]:
    """The ``tls.*`` properties of the settings file at ``path`` with their text (none when it is missing or does not
    load): all of them a Java broker's or name server's Configuration holds, as the ``-c`` file's properties
    (``registerConfig``), the config objects having no ``tls.*`` field (see :data:`SYSTEM_PROPERTY_PREFIX`)."""
    try:
        props = parse_properties(decode_properties_file(path.read_bytes()))
    except (OSError, UnreadableProperties):
        return {}
    return {key: text for key, text in props.items() if key.startswith(SYSTEM_PROPERTY_PREFIX)}


def held_tls_texts(settings: Mapping[str, str], file_tls: Mapping[str, str], *, secrets: bool) -> dict[str, str]:
    """``settings`` (property texts) without their ``tls.*`` keys, with ``file_tls`` (the ``-c`` file's, from
    :func:`tls_properties_in`) instead, its passwords only with ``secrets``: what Java's Configuration shows and
    persists."""
    kept = {key: text for key, text in settings.items() if not key.startswith(SYSTEM_PROPERTY_PREFIX)}
    return kept | {key: text for key, text in file_tls.items() if secrets or key not in SECRET_KEYS}


#: The boolean ``tls.*`` keys, as ``tls.config.file`` names them.
_BOOLEAN_KEYS: Final = frozenset(
    str(f.metadata["key"]) for f in attrs.fields(TlsSettings) if f.type in (bool, "bool", "bool | None")
)


def tls_settings_of(config: TlsSettings) -> TlsSettings:
    """The ``tls.*`` part of a settings object, with ``tls.config.file`` applied over it when that file exists
    (everything but the mode and ``tls.enable``; a boolean there is true only when it reads ``true``, in any case, as
    ``Boolean.parseBoolean`` reads it in RocketMQ's
    ``remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsHelper.java``: never an error). A file
    ``Properties.load`` refuses raises :class:`TlsContextError`, as that IllegalArgumentException stops Java's start."""
    base = TlsSettings(**{f.name: getattr(config, f.name) for f in attrs.fields(TlsSettings)})
    path = Path(base.tls_config_file)
    if not base.tls_config_file or not path.is_file():
        return base
    try:
        data = path.read_bytes()
    except OSError:  # TlsHelper.extractTlsConfigFromFile skips a file it cannot read
        return base
    try:
        props = parse_properties(decode_properties_file(data))
    except UnreadableProperties as exc:  # Properties.load's IllegalArgumentException, which TlsHelper lets through
        raise TlsContextError(f"cannot read {path}: {exc}") from exc
    props.pop("tls.server.mode", None)
    props.pop("tls.enable", None)
    for key in _BOOLEAN_KEYS.intersection(props):
        # TlsHelper.extractTlsConfigFromFile reads these with Boolean.parseBoolean: anything but "true" is false,
        # "true " too (Properties.load keeps a value's trailing blanks), so no strip.
        props[key] = "true" if props[key].lower() == "true" else "false"
    settings, _unknown = apply_properties(base, props)
    return settings


def environment_name(key: str) -> str:
    """The environment variable standing for the Java system property ``key`` on a client: ``tls.client.certPath``
    is ``TLS_CLIENT_CERT_PATH``, as ``tls.enable`` is ``TLS_ENABLE`` (``client.config.default_use_tls``)."""
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", key).replace(".", "_").upper()


def settings_from_environment(environ: Mapping[str, str]) -> TlsSettings:
    """The ``tls.*`` settings a client process was given as environment variables (:func:`environment_name`), over
    the defaults: what a Java client reads from its JVM system properties in TlsSystemConfig. ``tls.config.file``
    (``TLS_CONFIG_FILE``, by default ``/etc/rocketmq/tls.properties``) is applied over them when a context is built
    (:func:`tls_settings_of`), as ``TlsHelper.buildSslContext`` does."""
    keys = (str(f.metadata["key"]) for f in attrs.fields(TlsSettings))
    props = {key: environ[name] for key in keys if (name := environment_name(key)) in environ}
    settings, _unknown = apply_properties(TlsSettings(), props)
    return settings


def self_signed_pem() -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for ``localhost`` / 127.0.0.1 / ::1, in PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rocketrio test mode")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), *(x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _load_generated(ctx: ssl.SSLContext) -> None:
    cert_pem, key_pem = self_signed_pem()
    with tempfile.TemporaryDirectory(prefix="rocketrio-tls-") as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)


def load_key_pair(ctx: ssl.SSLContext, cert: str, key: str | None, password: str | None) -> None:
    """Load a certificate chain and its key into ``ctx``; an encrypted key without ``password`` raises
    ``ssl.SSLError``, as Netty refuses it (TlsHelper passes a null password), where OpenSSL's default would prompt on
    the terminal or read standard input, blocking the process. A PKCS#8 key OpenSSL 3 cannot decrypt (RC4, as
    RocketMQ's TLS guide encrypts keys) is decrypted by :func:`_load_reencrypted`. OpenSSL's own errors but a
    mismatched pair (which :func:`fatal_at_start` tells apart by its reason) are raised again naming the files, as
    Netty's message names the key ("[SSL] PEM lib" said neither which file nor why)."""
    try:
        ctx.load_cert_chain(cert, key or None, password or functools.partial(_no_password, key or cert))
    except ssl.SSLError as exc:
        if getattr(exc, "library", None) is None or exc.reason == "KEY_VALUES_MISMATCH":
            raise  # ours (no password), or one the caller tells apart
        if key and password and _load_reencrypted(ctx, cert, key, password):
            return
        raise ssl.SSLError(0, f"{cert} and {key or cert} do not load as a certificate and its key (not PEM, or a "
                              f"wrong key password): {exc}") from exc  # fmt: skip


def _load_reencrypted(ctx: ssl.SSLContext, cert: str, key: str, password: str) -> bool:
    """Load an encrypted PKCS#8 key OpenSSL's default provider cannot decrypt (RocketMQ's TLS guide,
    docs/en/Configuration_TLS.md, encrypts with ``PBE-SHA1-RC4-128``, which Netty reads through the JDK's
    ``EncryptedPrivateKeyInfo``; OpenSSL 3 keeps RC4 in its legacy provider): decrypted with ``cryptography`` and
    handed to ``ssl`` encrypted again with the same password (a private temporary file, never the key in clear).
    False when ``cryptography`` cannot decrypt it either (not PEM, a wrong password)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    secret = password.encode()
    try:
        private_key = serialization.load_pem_private_key(Path(key).read_bytes(), secret)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm):
        return False
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(secret)
    )
    with tempfile.TemporaryDirectory(prefix="rocketrio-tls-") as tmp:
        copy = Path(tmp) / "key.pem"
        copy.touch(mode=0o600)
        copy.write_bytes(pem)
        ctx.load_cert_chain(cert, copy, password)
    return True


def _no_password(key: str) -> str:
    # An SSLError's text is its strerror (else the repr of its args): the message as errno 0's strerror.
    raise ssl.SSLError(0, f"the private key {key} is encrypted and no key password is set")


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


def server_context(config: TlsSettings) -> ssl.SSLContext:
    """The server's context from ``config`` (see the module docstring). Raises ``OSError`` / ``ssl.SSLError``."""
    settings = tls_settings_of(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if settings.tls_test_mode_enable:
        _load_generated(ctx)
        return ctx
    for path in (settings.tls_server_cert_path, settings.tls_server_key_path):
        try:
            if path:  # TlsHelper opens both with FileInputStream before Netty reads either
                Path(path).open("rb").close()
        except OSError as exc:
            raise TlsFileUnopenable(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
    load_key_pair(ctx, settings.tls_server_cert_path, settings.tls_server_key_path, settings.tls_server_key_password)
    need = _CLIENT_AUTH.get(settings.tls_server_need_client_auth.strip().lower(), ssl.CERT_NONE)
    # RocketMQ's TlsHelper: with authClient the trust file, else the platform's default CAs; without it any
    # certificate, which Python's ssl cannot accept, so only ``require`` asks then (checked as with authClient: a
    # client without a certificate is refused as in Java); ``optional`` accepts every client either way.
    if settings.tls_server_auth_client or need == ssl.CERT_REQUIRED:
        if settings.tls_server_trust_cert_path:
            ctx.load_verify_locations(settings.tls_server_trust_cert_path)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = need
    return ctx


def client_context(
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    key_password: str | None = None,
    *,
    default_trust: bool = False,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context: no server check without ``ca_file`` (RocketMQ's default client), the chain and (unless not
    ``check_hostname``) the host name checked against it otherwise, or against the platform's default CAs with
    ``default_trust``; ``cert_file`` / ``key_file`` present a client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca_file or default_trust:
        ctx.check_hostname = check_hostname
    if ca_file:
        ctx.load_verify_locations(ca_file)
    elif default_trust:
        ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        load_key_pair(ctx, cert_file, key_file, key_password)
    return ctx


def client_key_files_open(cert_file: str | None, key_file: str | None) -> bool:
    """Whether the client certificate and key files (those given) can be opened; if not, logged as RocketMQ's client
    logs it: ``TlsHelper.buildSslContext(true)`` opens both with ``FileInputStream``, and ``NettyRemotingClient``'s
    constructor (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java) logs the
    IOException and goes on with no SSL context, so its connections are plaintext. Callers then use no context."""
    for path in (cert_file, key_file):
        if not path:
            continue
        try:
            Path(path).open("rb").close()
        except OSError as exc:
            log.error("Failed to create SSLContext (%s): connections are insecure as SSLContext is null!", exc)
            return False
    return True


def settings_client_context(config: TlsSettings, use_tls: bool) -> ssl.SSLContext | None:
    """The context ``TlsHelper.buildSslContext(true)`` makes of ``config``: the broker's towards its name servers, the
    name server's towards a product environment, and a client's given no TLS file (:func:`settings_from_environment`).
    None unless ``use_tls`` (the broker's ``useTLS``, decided by ``broker.security.client_use_tls`` alone; the name
    server's ``tls.enable``), and None too, logged, when the client
    certificate or key file cannot be opened (RocketMQ then connects in plaintext); trusts ``tls.client.trustCertPath``
    only with ``tls.client.authServer``, and then checks the server's chain but not its host name, as RocketMQ:
    ``NettyRemotingClient`` builds its handler with ``sslContext.newHandler(alloc)``, no peer host, so Netty's engine
    has no host to check (name servers are addressed by IP, which certificates made by RocketMQ's TLS guide do not
    name)."""
    if not use_tls:
        return None
    settings = tls_settings_of(config)
    trust = settings.tls_client_trust_cert_path if settings.tls_client_auth_server else None
    if settings.tls_test_mode_enable:
        return client_context()
    ctx = client_context(
        trust,
        default_trust=settings.tls_client_auth_server,  # RocketMQ's TlsHelper: the JDK's CAs without a trust file
        check_hostname=False,
    )
    cert, key = settings.tls_client_cert_path, settings.tls_client_key_path
    if not client_key_files_open(cert, key):
        return None
    if cert:
        load_key_pair(ctx, cert, key, settings.tls_client_key_password)
    return ctx
