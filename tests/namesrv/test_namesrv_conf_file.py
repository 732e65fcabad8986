"""``mqnamesrv -c FILE``: the file is where UPDATE_NAMESRV_CONFIG writes the settings back, as RocketMQ 4.9.8's
NamesrvStartup (namesrv/src/main/java/org/apache/rocketmq/namesrv/NamesrvStartup.java:
``namesrvConfig.setConfigStorePath(file)``) and NamesrvController
(``configuration.setStorePathFromConfig(namesrvConfig, "configStorePath")``) do; it is read as ISO-8859-1.
Found by a review; failed before (the update went to $HOME/namesrv/namesrv.properties).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import trio

from namesrv.cli import build_config
from namesrv.config_admin import NamesrvConfigAdmin
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import decode_properties_file, parse_properties
from tests.namesrv.conftest import StartNamesrv

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOT = re.compile(rb"The Name Server boot success\. serializeType=JSON, address (\S+):(\d+)\n")


def test_the_c_file_is_the_config_store_path_and_is_read_as_latin1(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_bytes(b"# caf\xe9\nrocketmqHome=/opt/caf\xe9\n")
    config = build_config(str(conf), [])
    assert (config.config_store_path, config.rocketmq_home) == (str(conf), "/opt/caf\xe9")


async def test_update_namesrv_config_is_written_back_to_the_c_file(tmp_path: Path) -> None:
    """Java persists an UPDATE_NAMESRV_CONFIG into the -c file, so a restart with the same file keeps it."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenPort=0\nlistenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "namesrv.cli", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO_ROOT), env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        out = b""
        with trio.fail_after(60):
            while not BOOT.search(out):
                chunk = await proc.stdout.receive_some()
                assert chunk, out
                out += chunk
        match = BOOT.search(out)
        assert match is not None
        addr = f"{match.group(1).decode()}:{int(match.group(2))}"
        async with RemotingClient() as client:
            body = "orderMessageEnable=true\nmetricsLabel=caf\u00e9 \u4e2d\n".encode()
            answer = await client.invoke(addr, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body), 10)
            assert answer.code == ResponseCode.SUCCESS
    finally:
        proc.kill()
        await proc.wait()
    written = parse_properties(decode_properties_file(conf.read_bytes()))
    assert (written["orderMessageEnable"], written["metricsLabel"]) == ("true", "caf\u00e9 \u4e2d")
    assert written["listenHost"] == "127.0.0.1"


async def test_update_namesrv_config_keeps_the_c_files_key_password(tmp_path: Path) -> None:
    """Java's Configuration holds every key of the -c file (``registerConfig(properties)``) and ``persist`` writes them
    all back (common/src/main/java/org/apache/rocketmq/common/Configuration.java), a ``tls.server.keyPassword`` the
    operator put there included. Ours rewrote the file without it (passwords are never shown), so the next start could
    not decrypt the server key. GET_NAMESRV_CONFIG still does not show it."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("tls.server.keyPath=/etc/rocketmq/server.key\ntls.server.keyPassword=s3cret\n")
    admin = NamesrvConfigAdmin(build_config(str(conf), []), config_file=conf)
    await admin.update("orderMessageEnable=true\n")
    written = parse_properties(decode_properties_file(conf.read_bytes()))
    assert (written["orderMessageEnable"], written["tls.server.keyPassword"]) == ("true", "s3cret")
    assert build_config(str(conf), []).tls_server_key_password == "s3cret"
    assert "s3cret" not in admin.formatted()


async def test_update_namesrv_config_keeps_the_c_files_permissions(tmp_path: Path) -> None:
    """The -c file may hold a TLS key password, so an operator keeps it 0600; an update writes the password back,
    so the rewritten file keeps the old one's permissions (as the broker's -c file does). Java's
    ``MixAll.string2File`` makes a new file with default permissions; ours rewrote it 0644 (found by a review)."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("tls.server.keyPassword=s3cret\n")
    conf.chmod(0o600)
    await NamesrvConfigAdmin(build_config(str(conf), []), config_file=conf).update("orderMessageEnable=true\n")
    assert "orderMessageEnable=true" in conf.read_text()
    assert conf.stat().st_mode & 0o777 == 0o600


async def test_update_namesrv_config_writes_no_password_the_file_did_not_hold(tmp_path: Path) -> None:
    """A key password given on the command line (``--tls.server.keyPassword``; in RocketMQ a JVM system property,
    never part of Configuration) is not written into ``configStorePath`` by an update: only a password the file
    already held is kept there."""
    store = tmp_path / "namesrv.properties"
    config = build_config(None, ["--tls.server.keyPassword", "s3cret", "--configStorePath", str(store)])
    admin = NamesrvConfigAdmin(config)
    await admin.update("orderMessageEnable=true\n")
    assert "orderMessageEnable=true" in store.read_text() and "s3cret" not in store.read_text()


async def test_tls_settings_not_in_the_file_are_neither_persisted_nor_shown(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """RocketMQ's ``tls.*`` are JVM system properties (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    TlsSystemConfig.java), not fields of the NamesrvConfig and NettyServerConfig that 4.9.8's NamesrvController
    registers with its Configuration: GET_NAMESRV_CONFIG shows, and ``persist`` writes to ``configStorePath``, only
    the ``tls.*`` keys the ``-c`` file held (``registerConfig(properties)``). Ours wrote and showed every one, the
    command line's and the defaults, so they stuck in the ``-c`` file after the command line dropped them."""
    store = tmp_path / "namesrv.properties"
    store.write_text("tls.server.need.client.auth=optional\n")
    _, addr = await start_namesrv(
        config_file=store,
        config_store_path=str(store),
        tls_server_mode="disabled",
        tls_config_file=str(tmp_path / "tls.properties"),
    )
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert (await client.invoke(addr, update, 10)).code == ResponseCode.SUCCESS
    shown = parse_properties((await client.invoke(addr, request(RequestCode.GET_NAMESRV_CONFIG), 10)).body.decode())
    written = parse_properties(decode_properties_file(store.read_bytes()))
    assert written["orderMessageEnable"] == "true"
    for texts in (shown, written):
        assert {key: text for key, text in texts.items() if key.startswith("tls.")} == {
            "tls.server.need.client.auth": "optional"
        }


async def test_without_c_the_config_store_files_tls_keys_are_neither_shown_nor_kept(
    start_namesrv: StartNamesrv, client: RemotingClient, tmp_path: Path
) -> None:
    """Only ``mqnamesrv -c FILE`` registers a file's properties with Configuration (4.9.8's NamesrvStartup calls
    ``registerConfig(properties)``, ``properties`` null without ``-c``); Configuration never reads its
    ``configStorePath`` file. A name server started without ``-c`` showed the ``tls.*`` keys of that file (by default
    $HOME/namesrv/namesrv.properties) and wrote them back (found by a review)."""
    store = tmp_path / "namesrv.properties"
    store.write_text("tls.server.need.client.auth=optional\n")
    _, addr = await start_namesrv(config_store_path=str(store))
    shown = parse_properties((await client.invoke(addr, request(RequestCode.GET_NAMESRV_CONFIG), 10)).body.decode())
    assert not [key for key in shown if key.startswith("tls.")]
    update = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert (await client.invoke(addr, update, 10)).code == ResponseCode.SUCCESS
    written = parse_properties(decode_properties_file(store.read_bytes()))
    assert written["orderMessageEnable"] == "true" and not [key for key in written if key.startswith("tls.")]
