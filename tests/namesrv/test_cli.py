"""``mqnamesrv``: option parsing, and the real console script as a subprocess answering a route request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

from namesrv.cli import boot_line, build_config
from namesrv.cli import main as namesrv_main
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import PropertiesError, parse_property_args
from tests.namesrv.conftest import (
    BOOT,
    ROUTE_OF_TOPIC_TEST,
    java_register_request,
    namesrv_process,
    route_request,
    stop_with_sigint,
)

MQNAMESRV = Path(sys.executable).with_name("mqnamesrv")


def test_property_args_accept_both_spellings_and_bare_flags() -> None:
    args = ["--listenPort", "0", "--kvConfigPath=/tmp/kv.json", "--orderMessageEnable"]
    assert parse_property_args(args) == {
        "listenPort": "0",
        "kvConfigPath": "/tmp/kv.json",
        "orderMessageEnable": "true",
    }
    with pytest.raises(PropertiesError):
        parse_property_args(["stray"])


def test_config_precedence_file_then_properties(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        "# a RocketMQ namesrv config\nlistenPort=9877\nkvConfigPath=/data/kv.json\norderMessageEnable=true\n"
    )
    config = build_config(str(conf), ["--kvConfigPath", "/other/kv.json"])
    assert (config.listen_port, config.kv_config_path, config.order_message_enable) == (9877, "/other/kv.json", True)
    assert build_config(str(conf), ["--listenPort", "1"]).listen_port == 1
    assert build_config(None, []).listen_port == 9876


def test_boot_line_shows_a_connectable_address() -> None:
    assert boot_line(("0.0.0.0", 9876)) == "The Name Server boot success. serializeType=JSON, address 127.0.0.1:9876"
    assert boot_line(("127.0.0.2", 1)).endswith("address 127.0.0.2:1")


async def _booted_address(proc: trio.Process) -> str:
    """The address a started ``mqnamesrv`` prints in its boot line (30 s at most)."""
    assert proc.stdout is not None
    output = b""
    with trio.fail_after(30):
        while (match := BOOT.search(output)) is None:
            chunk = await proc.stdout.receive_some()
            assert chunk, f"mqnamesrv exited before booting: {output!r}"
            output += chunk
    return f"{match.group(1).decode()}:{int(match.group(2))}"


async def test_mqnamesrv_subprocess_serves_routes_and_stops_on_sigint(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kvConfig.json'}\n")
    argv = [str(MQNAMESRV), "-c", str(conf), "--listenPort", "0"]
    async with namesrv_process(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        addr = await _booted_address(proc)
        async with RemotingClient() as client:
            assert (await client.invoke(addr, java_register_request(), 10.0)).code == ResponseCode.SUCCESS
            route = await client.invoke(addr, route_request("TopicTest"), 10.0)
            assert bytes(route.body) == ROUTE_OF_TOPIC_TEST
        await stop_with_sigint(proc)


async def test_mqnamesrv_holds_the_conf_files_keys_no_setting_has_as_configuration_does(tmp_path: Path) -> None:
    """NamesrvStartup registers the ``-c`` file's properties with Configuration (``registerConfig``) and makes that
    file its ``configStorePath``: GET_NAMESRV_CONFIG shows every key of the file, and the ``persist()`` after an
    UPDATE_NAMESRV_CONFIG writes them all back, an update of one of them included (``mergeIfExist``), a key new to
    both dropped (common/src/main/java/org/apache/rocketmq/common/Configuration.java, namesrv/src/main/java/org/
    apache/rocketmq/namesrv/NamesrvStartup.java). Ours showed only its fields, and the first update rewrote the file
    without the keys it did not know: a newer RocketMQ's settings and a misspelt one were lost from it."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        f"listenHost=127.0.0.1\nkvConfigPath={tmp_path / 'kvConfig.json'}\nenableAllTopicList=false\nlistenPrt=1\n"
    )
    argv = [str(MQNAMESRV), "-c", str(conf), "--listenPort", "0"]
    async with namesrv_process(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        addr = await _booted_address(proc)
        async with RemotingClient() as client:
            before = await client.invoke(addr, request(RequestCode.GET_NAMESRV_CONFIG), 10.0)
            body = b"enableAllTopicList=true\nneverConfigured=1\n"
            answer = await client.invoke(addr, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body), 10.0)
            assert answer.code == ResponseCode.SUCCESS
            after = await client.invoke(addr, request(RequestCode.GET_NAMESRV_CONFIG), 10.0)
        await stop_with_sigint(proc)
    shown = bytes(before.body).decode().splitlines()
    assert "enableAllTopicList=false" in shown and "listenPrt=1" in shown
    shown = bytes(after.body).decode().splitlines()
    assert "enableAllTopicList=true" in shown and "listenPrt=1" in shown
    assert not any(line.startswith("neverConfigured=") for line in shown)
    written = conf.read_text().splitlines()
    assert "enableAllTopicList=true" in written and "listenPrt=1" in written
    assert not any(line.startswith("neverConfigured=") for line in written)


def test_mqnamesrv_p_prints_every_setting_and_exits_as_namesrv_startup() -> None:
    """NamesrvStartup.buildCommandlineOptions (4.9.8): ``-p``/``--printConfigItem`` is a flag that prints every
    setting as ``key=value`` and exits 0, without starting; ``-n`` (ServerUtil's namesrvAddr) is accepted. ``-p`` was
    our listen port (now ``--listenPort``, a property as any other)."""
    result = CliRunner().invoke(namesrv_main, ["-n", "127.0.0.1:9876", "-p", "--listenPort", "9871"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "listenPort=9871" in lines and any(line.startswith("kvConfigPath=") for line in lines)
    assert "boot success" not in result.output


def test_mqnamesrv_takes_and_prints_the_netty_server_config_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RocketMQ 4.9.8's NamesrvStartup reads a namesrv.properties (and ``--name value``) into NamesrvConfig and
    NettyServerConfig (MixAll.properties2Object) and ``-p`` prints both objects' fields (namesrv/src/main/java/org/
    apache/rocketmq/namesrv/NamesrvStartup.java). Ours warned "ignoring unknown property" for NettyServerConfig's
    thread, buffer and semaphore keys, as for a typo, and ``-p`` printed none of them."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("serverSelectorThreads=5\nserverSocketBacklog=2048\nuseEpollNativeSelector=true\n")
    build_config(str(conf), ["--serverCallbackExecutorThreads", "2", "--writeBufferHighWaterMark", "65536"])
    assert capsys.readouterr().err == ""
    result = CliRunner().invoke(namesrv_main, ["-c", str(conf), "-p"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for line in ("serverSelectorThreads=5", "serverSocketBacklog=2048", "useEpollNativeSelector=true"):
        assert line in lines
    for line in ("serverOnewaySemaphoreValue=256", "serverAsyncSemaphoreValue=64", "writeBufferLowWaterMark=0"):
        assert line in lines
    assert "serverPooledByteBufAllocatorEnable=true" in lines


def test_mqnamesrv_and_mqbroker_read_the_file_named_by_the_long_option(tmp_path: Path) -> None:
    """``--configFile`` is the long name of ``-c`` in NamesrvStartup and BrokerStartup; it was taken for an unknown
    property, and the server started on its defaults."""
    from broker.cli import main as broker_main

    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=9872\n")
    result = CliRunner().invoke(namesrv_main, ["--configFile", str(conf), "-p"])
    assert result.exit_code == 0 and "listenPort=9872" in result.output.splitlines(), result.output
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-from-file\n")
    result = CliRunner().invoke(broker_main, ["--configFile", str(conf), "-p"])
    assert result.exit_code == 0 and "brokerName=broker-from-file" in result.output.splitlines(), result.output


def test_the_old_listen_port_spelling_still_sets_the_port() -> None:
    """``--listen-port`` (our old long option) stays an alias of ``--listenPort``: dropped with ``-p``, it was taken
    for an unknown property and the name server started on 9876."""
    result = CliRunner().invoke(namesrv_main, ["--listen-port", "1234", "-p"])
    assert "listenPort=1234" in result.output.splitlines(), result.output


async def _boot_or_exit(args: list[str]) -> tuple[int | None, bytes]:
    """Run ``python -m namesrv.cli ARGS`` until it prints its boot line (then it is killed: None) or exits (its
    status); returns that and its stderr."""
    argv = [sys.executable, "-m", "namesrv.cli", *args]
    async with namesrv_process(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = b"", b""
        with trio.fail_after(60):
            while not BOOT.search(out):
                chunk = await proc.stdout.receive_some()
                if not chunk:
                    break
                out += chunk
            if BOOT.search(out):
                return None, err
            while chunk := await proc.stderr.receive_some():
                err += chunk
            return await proc.wait(), err


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "1_000"])
async def test_a_number_setting_java_cannot_parse_keeps_its_default(tmp_path: Path, value: str) -> None:
    """``serverChannelMaxIdleTimeSeconds`` is a Java ``int`` (NettyServerConfig), which ``Integer.parseInt`` never
    reads from ``nan``, ``inf`` or ``1_000``. The name server took Python's float of them: ``nan`` booted, then the
    first connection's idle timer raised and the whole process died with a traceback. MixAll.properties2Object
    swallows the NumberFormatException (common/src/main/java/org/apache/rocketmq/common/MixAll.java): the setting
    keeps its default and the name server starts."""
    status, _ = await _boot_or_exit(
        ["--listenPort", "0", "--listenHost", "127.0.0.1", "--kvConfigPath", str(tmp_path / "kv.json"),
         "--serverChannelMaxIdleTimeSeconds", value]
    )  # fmt: skip
    assert status is None, "the name server did not boot"
    config = build_config(None, ["--scanInterval", value, "--serverChannelMaxIdleTimeSeconds", value])
    assert (config.scan_interval, config.server_channel_max_idle_time_seconds) == (10.0, 120.0)


def test_mqnamesrv_p_prints_in_javas_field_order() -> None:
    """NamesrvStartup's ``-p`` prints NamesrvConfig's fields, then NettyServerConfig's, each in its class's
    declaration order (MixAll.printObjectProperties walks ``getDeclaredFields``; namesrv/src/main/java/org/apache/
    rocketmq/namesrv/NamesrvStartup.java). Ours printed the ``tls.*`` keys and NettyServerConfig's first,
    NamesrvConfig's in the middle. Keys of ours that Java lacks come after Java's."""
    result = CliRunner().invoke(namesrv_main, ["-p"])
    assert result.exit_code == 0, result.output
    keys = [line.split("=", 1)[0] for line in result.output.splitlines()]
    assert keys[:9] == ["rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
                        "orderMessageEnable", "configBlackList", "listenPort", "serverWorkerThreads"]  # fmt: skip
    positions = [keys.index(key) for key in ("serverWorkerThreads", "useEpollNativeSelector", "tls.server.mode")]
    assert positions == sorted(positions)


@pytest.mark.parametrize("args", [["-c"], ["-x"]])
async def test_a_command_line_that_does_not_parse_exits_1_as_server_util(args: list[str]) -> None:
    """4.9.8's ServerUtil.parseCmdLine prints the usage and calls ``System.exit(1)`` on commons-cli's ParseException:
    an option without its value, an unknown option (srvutil/src/main/java/org/apache/rocketmq/srvutil/
    ServerUtil.java). Ours exited 2, click's usage status."""
    status, err = await _boot_or_exit(args)
    assert status == 1 and b"Error:" in err and b"Traceback" not in err, (status, err.decode(errors="replace"))


async def test_a_start_failure_exits_255_as_main0(tmp_path: Path) -> None:
    """NamesrvStartup.main0 catches every Throwable of the start with ``System.exit(-1)``, status 255 (ours: 1 or 2):
    a ``-c`` file its FileInputStream cannot open, a listen port out of range (``new InetSocketAddress`` refuses it),
    a port another socket listens on. Each keeps its message."""
    kv = ["--kvConfigPath", str(tmp_path / "kv.json"), "--listenHost", "127.0.0.1"]
    status, err = await _boot_or_exit(["-c", str(tmp_path / "none.properties"), *kv])
    assert status == 255 and b"none.properties" in err, (status, err.decode(errors="replace"))
    status, err = await _boot_or_exit(["--listenPort", "70000", *kv])
    assert status == 255 and b"listenPort" in err, (status, err.decode(errors="replace"))
    with trio.socket.socket() as taken:
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        status, err = await _boot_or_exit(["--listenPort", str(taken.getsockname()[1]), *kv])
    assert status == 255 and b"mqnamesrv: cannot listen on" in err, (status, err.decode(errors="replace"))


async def test_a_config_file_that_cannot_be_read_exits_255_with_one_line(
    tmp_path: Path, unreadable_conf: tuple[Path, str]
) -> None:
    """NamesrvStartup.createNamesrvController reads the ``-c`` file through ``new FileInputStream(file)``, and main0's
    catch of every Throwable ends with ``System.exit(-1)``: a file it cannot open (a Unix socket, a path under a
    regular file) stops the start, the exception naming the file and the OS's reason. Ours died with a Python
    traceback on the socket and said "does not exist" of the other."""
    path, reason = unreadable_conf
    status, err = await _boot_or_exit(["-c", str(path), "--kvConfigPath", str(tmp_path / "kv.json")])
    lines = err.decode(errors="replace").strip().splitlines()
    assert status == 255 and len(lines) == 1, (status, lines[-20:])
    assert str(path) in lines[0] and reason in lines[0], lines


async def test_a_tls_certificate_that_does_not_load_stops_the_start_as_namesrv_startup(tmp_path: Path) -> None:
    """4.9.8's NamesrvController builds its NettyRemotingServer, whose SSL context Netty refuses with an
    IllegalArgumentException for a certificate file that does not parse: NamesrvStartup exits. Ours served on,
    closing every TLS connection (found by a review). A certificate file that cannot be opened is only logged, as
    Java logs the IOException (tests/remoting/test_tls.py)."""
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    status, err = await _boot_or_exit(
        ["--listenPort", "0", "--listenHost", "127.0.0.1", "--kvConfigPath", str(tmp_path / "kv.json"),
         "--tls.config.file", str(tmp_path / "none"), "--tls.test.mode.enable", "false",
         "--tls.server.certPath", str(tmp_path / "junk.pem"), "--tls.server.keyPath", str(tmp_path / "junk.pem")]
    )  # fmt: skip
    assert status == 255  # main0's catch: System.exit(-1)
    assert b"mqnamesrv: cannot build the TLS context" in err


async def test_a_tls_config_file_java_cannot_load_stops_the_start_with_one_line(tmp_path: Path) -> None:
    """4.9.8's TlsHelper.extractTlsConfigFromFile catches only an IOException of ``Properties.load``: a malformed
    ``\\uXXXX`` escape's IllegalArgumentException stops NamesrvStartup (as mqbroker stops, with one line). Ours
    died with a Python traceback."""
    props = tmp_path / "tls.properties"
    props.write_text("tls.server.certPath=\\u12G4\n")
    status, err = await _boot_or_exit(
        ["--listenPort", "0", "--listenHost", "127.0.0.1", "--kvConfigPath", str(tmp_path / "kv.json"),
         "--tls.config.file", str(props)]
    )  # fmt: skip
    assert status == 255  # main0's catch: System.exit(-1)
    assert b"Traceback" not in err and f"mqnamesrv: cannot read {props}".encode() in err, err.decode()[-2000:]


@pytest.mark.parametrize("value", ["1.5", "60.0", "1e2"])
def test_server_channel_max_idle_time_seconds_is_a_java_int(tmp_path: Path, value: str) -> None:
    """NettyServerConfig's ``serverChannelMaxIdleTimeSeconds`` is an ``int`` (remoting/src/main/java/org/apache/
    rocketmq/remoting/netty/NettyServerConfig.java): ``Integer.parseInt`` refuses ``1.5``, so MixAll.properties2Object
    leaves 120, and ``-p`` (like GET_NAMESRV_CONFIG and the file UPDATE_NAMESRV_CONFIG persists) prints ``120``. The
    name server took any decimal and printed ``120.0``, which a Java name server given that file back ignores."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"serverChannelMaxIdleTimeSeconds={value}\n")
    assert build_config(str(conf), []).server_channel_max_idle_time_seconds == 120
    result = CliRunner().invoke(namesrv_main, ["-p"])
    assert result.exit_code == 0, result.output
    assert "serverChannelMaxIdleTimeSeconds=120\n" in result.output


def test_mqnamesrv_c_says_it_loaded_the_file_before_anything_else(tmp_path: Path) -> None:
    """NamesrvStartup prints ``load config properties file OK, <file>`` on stdout once it has read the ``-c`` file,
    before ``-p`` prints the settings or the server starts (namesrv/src/main/java/org/apache/rocketmq/namesrv/
    NamesrvStartup.java ``createNamesrvController``, 4.9.8). Ours printed nothing."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=9873\n")
    result = CliRunner().invoke(namesrv_main, ["-c", str(conf), "-p"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"load config properties file OK, {conf}"
    assert "listenPort=9873" in lines[1:]
    assert "load config" not in CliRunner().invoke(namesrv_main, ["-p"]).stdout
