"""``mqbroker`` start-up checks from a ``-c`` file and options, as real processes, as RocketMQ 4.9.8's BrokerStartup
(broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java) does them: the file is ISO-8859-1, a number
past its Java type keeps the default (the key named), ports stay in 0..65535 (status 2, the key named), a name server
address needs a port, and ``-p``/``-m`` print the settings and exit 0. Found by a review; these failed before."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from broker.cli import build_config, config_lines, printed_config
from broker.controller import BrokerController
from broker.security import server_config_of
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from remoting.codec.java_properties import PropertiesError
from remoting.cpus import available_cpus
from remoting.server_main import sole_exception
from remoting.tls import client_context
from store.metadata_files import ConfigFileError
from tests.broker.helpers import broker_from_conf
from tests.conftest import SMALL_STORE
from tests.remoting.helpers import RawPeer, accepted_buffer_sizes, listen_backlog

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOT = re.compile(rb"The broker\[[^\]]*\] boot success")
SMALL = ["--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"]


async def _run_broker(args: list[str], tmp_path: Path) -> tuple[int | None, bytes, bytes]:
    """Start ``python -m broker.cli`` from this checkout; read its output until it boots or exits. Returns
    (exit status or None if it booted and was killed, stdout, stderr)."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "broker.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO_ROOT),
    )  # fmt: skip
    out, err = b"", b""
    assert proc.stdout is not None and proc.stderr is not None
    try:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:

                async def drain_err() -> None:
                    nonlocal err
                    assert proc.stderr is not None
                    while chunk := await proc.stderr.receive_some():
                        err += chunk

                nursery.start_soon(drain_err)
                while not BOOT.search(out):
                    chunk = await proc.stdout.receive_some()
                    if not chunk:
                        break
                    out += chunk
                if BOOT.search(out):
                    proc.kill()
                    await proc.wait()
                    return None, out, err
                await proc.wait()
        return proc.returncode, out, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_conf_file_with_a_latin1_comment_starts_the_broker(tmp_path: Path) -> None:
    """Java's Properties.load(InputStream) reads ISO-8859-1: any byte is fine in a comment (it was decoded as UTF-8
    and the broker died with a UnicodeDecodeError)."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# broker du caf\xe9\nbrokerName=latin-b\nlistenPort=0\nlistenHost=127.0.0.1\n")
    status, _, err = await _run_broker(
        ["-c", str(conf), "-n", "127.0.0.1:1", "--storePathRootDir", str(tmp_path / "store"), *SMALL], tmp_path
    )
    assert status is None, f"exit {status}: {err.decode(errors='replace')[-600:]}"


async def test_a_listen_port_past_65535_is_refused_not_wrapped(tmp_path: Path) -> None:
    """Java binds new InetSocketAddress(70000): 'port out of range', the broker does not start (getaddrinfo used to
    wrap it: the broker served on port 4464). The start fails and BrokerStartup exits -1 (status 255; ours exited 2,
    a click usage error's), the key named."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "70000", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL],
        tmp_path,
    )  # fmt: skip
    assert status == 255, f"booted: {out.decode(errors='replace')}"
    assert b"listenPort" in err


@pytest.mark.parametrize(
    "key, value", [("haListenPort", "99999999999"), ("transactionTimeOut", "99999999999999999999999")]
)
async def test_a_number_past_javas_range_keeps_the_default(tmp_path: Path, key: str, value: str) -> None:
    """Java's Integer.parseInt / Long.parseLong refuse these (they used to die with struct.error / OverflowError
    tracebacks), and MixAll.properties2Object swallows the NumberFormatException (common/src/main/java/org/apache/
    rocketmq/common/MixAll.java): the setting keeps its default, the broker starts, and ours names the key."""
    status, _, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenHost", "127.0.0.1", "--listenPort", "0",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL, f"--{key}", value],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert "Traceback" not in text, text[-800:]
    assert status is None and key in text


async def test_a_delay_level_with_an_unknown_unit_stops_the_start_without_a_traceback(tmp_path: Path) -> None:
    """4.9.8's ScheduleMessageService.parseDelayLevel knows the units s, m, h and d; another (``5x``) makes it
    return false, so DefaultMessageStore.load and BrokerController.initialize fail and the broker does not start. Ours
    died with a KeyError traceback; it reports the start failure naming messageDelayLevel, with BrokerStartup's
    status for a failed ``initialize``, ``System.exit(-3)``: 253 (it was 1)."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL, "--messageDelayLevel", "1s 5x"],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert status == 253, f"booted: {out.decode(errors='replace')}"
    assert "Traceback" not in text, text[-800:]
    assert "messageDelayLevel" in text and "5x" in text


@pytest.mark.parametrize("levels", ["", "1s  5s", "1s\t5s", "1_0s", "9223372036854775808s"])
async def test_a_delay_level_java_cannot_split_or_parse_stops_the_start(tmp_path: Path, levels: str) -> None:
    """4.9.8's ScheduleMessageService.parseDelayLevel splits messageDelayLevel at each single space
    (``String.split(" ")``: an empty value or two spaces give an empty level) and reads each number with
    Long.parseLong (no underscore, nothing past a long); any failure fails the store's load and the broker does not
    start (status 253, ``System.exit(-3)``). Ours split at any run of whitespace and took Python's int(), so these
    booted (an empty value: with no delay level at all)."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL, "--messageDelayLevel", levels],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert status == 253, f"booted: {out.decode(errors='replace')}"
    assert "Traceback" not in text, text[-800:]
    assert "messageDelayLevel" in text


@pytest.mark.parametrize("interval", ["0", "-5000"])
async def test_a_consumer_offset_flush_interval_of_zero_or_less_stops_the_start(tmp_path: Path, interval: str) -> None:
    """4.9.8's BrokerController.initialize schedules the consumer offsets' persist with ``scheduleAtFixedRate(...,
    flushConsumerOffsetInterval)``, which throws IllegalArgumentException for a period of 0 or less, and BrokerStartup
    exits: the broker does not start. Ours booted, and with 0 its save loop spun a CPU (saving without pause while
    commits came); a negative period ended it with a traceback after the boot."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL, "--flushConsumerOffsetInterval", interval],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert status == 255, f"booted: {out.decode(errors='replace')}"
    assert "Traceback" not in text, text[-800:]
    assert "flushConsumerOffsetInterval" in text and interval in text


@pytest.mark.parametrize("interval", ["0", "-10000"])
async def test_a_delay_offset_flush_interval_of_zero_or_less_stops_a_masters_start(
    tmp_path: Path, interval: str
) -> None:
    """4.9.8's ScheduleMessageService.start (run by DefaultMessageStore.start on a master outside DLedger mode)
    schedules the delay offsets' persist with ``scheduleAtFixedRate(..., flushDelayOffsetInterval)``, which throws
    IllegalArgumentException for a period of 0 or less, and BrokerStartup exits. Ours booted: with 0 the schedule's
    save loop spun a CPU, a negative period ended the broker after its boot on a message not naming the setting."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL, "--flushDelayOffsetInterval", interval],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert status == 255, f"booted: {out.decode(errors='replace')}"
    assert "Traceback" not in text, text[-800:]
    assert "flushDelayOffsetInterval" in text and interval in text


@pytest.mark.parametrize("interval", ["0", "-10000"])
async def test_a_clean_resource_interval_of_zero_or_less_stops_the_start(tmp_path: Path, interval: str) -> None:
    """4.9.8's DefaultMessageStore.start ends with addScheduleTask, which schedules cleanFilesPeriodically with
    ``scheduleAtFixedRate(..., cleanResourceInterval)``: a period of 0 or less throws IllegalArgumentException and
    BrokerStartup exits, whatever the role. Ours booted: with 0 the retention loop spun a CPU, a negative period
    ended the broker a minute after its boot on a message not naming the setting."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1", "--brokerRole", "SLAVE",
         "--brokerId", "1", "--storePathRootDir", str(tmp_path / "store"), *SMALL, "--cleanResourceInterval", interval],
        tmp_path,
    )  # fmt: skip
    text = err.decode(errors="replace")
    assert status == 255, f"booted: {out.decode(errors='replace')}"
    assert "Traceback" not in text, text[-800:]
    assert "cleanResourceInterval" in text and interval in text


@pytest.mark.parametrize("args", [["-c"], ["-x"], ["-n"]])
async def test_a_command_line_that_does_not_parse_exits_1_as_server_util(tmp_path: Path, args: list[str]) -> None:
    """4.9.8's ServerUtil.parseCmdLine prints the usage and calls ``System.exit(1)`` on commons-cli's ParseException:
    an option without its value, an unknown option (srvutil/src/main/java/org/apache/rocketmq/srvutil/
    ServerUtil.java). Ours exited 2, click's usage status."""
    status, out, err = await _run_broker(args, tmp_path)
    assert status == 1, f"exit {status}: {err.decode(errors='replace')[-600:]} {out.decode(errors='replace')}"
    assert b"Error:" in err and b"Traceback" not in err


async def test_a_config_file_that_cannot_be_opened_exits_255(tmp_path: Path) -> None:
    """BrokerStartup.createBrokerController opens the ``-c`` file with a FileInputStream: a missing one throws
    FileNotFoundException, which its catch of every Throwable ends with ``System.exit(-1)``, status 255. Ours exited 2,
    click's check that the file exists, whose message it keeps."""
    status, _, err = await _run_broker(["-c", str(tmp_path / "none.conf"), "-n", "127.0.0.1:1"], tmp_path)
    assert status == 255 and b"none.conf" in err and b"does not exist" in err, err.decode(errors="replace")[-600:]


async def test_a_config_file_that_cannot_be_read_exits_255_with_one_line(
    tmp_path: Path, unreadable_conf: tuple[Path, str]
) -> None:
    """BrokerStartup.createBrokerController reads the ``-c`` file through ``new FileInputStream(file)`` inside the
    catch of every Throwable that ends with ``System.exit(-1)``: a file it cannot open (a Unix socket, a path under a
    regular file) stops the start, the exception naming the file and the OS's reason. Ours died with a Python
    traceback on the socket and said "does not exist" of the other."""
    path, reason = unreadable_conf
    status, _, err = await _run_broker(["-c", str(path), "-n", "127.0.0.1:1"], tmp_path)
    lines = err.decode(errors="replace").strip().splitlines()
    assert status == 255 and len(lines) == 1, (status, lines[-20:])
    assert str(path) in lines[0] and reason in lines[0], lines


async def test_a_listen_port_that_cannot_be_bound_exits_255(tmp_path: Path) -> None:
    """NettyRemotingServer.start's bind fails on a port another socket listens on, and BrokerStartup.start's catch
    of every Throwable calls ``System.exit(-1)``: status 255 (ours exited 1)."""
    with trio.socket.socket() as taken:
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, out, err = await _run_broker(
            ["-n", "127.0.0.1:1", "--listenPort", str(port), "--listenHost", "127.0.0.1",
             "--storePathRootDir", str(tmp_path / "store"), *SMALL],
            tmp_path,
        )  # fmt: skip
    assert status == 255, f"booted: {out.decode(errors='replace')}"
    assert b"cannot start broker" in err and b"Traceback" not in err, err.decode(errors="replace")[-600:]


async def test_a_name_server_address_without_a_port_stops_the_start(tmp_path: Path) -> None:
    """BrokerStartup checks every namesrvAddr entry with RemotingUtil.string2SocketAddress and stops with 'The Name
    Server Address[127.0.0.1] illegal' (the broker used to boot and never register), and ``System.exit(-3)``: status
    253, which scripts and systemd units see (ours exited 2, a usage error's)."""
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1", "--listenPort", "0", "--listenHost", "127.0.0.1",
         "--storePathRootDir", str(tmp_path / "store"), *SMALL],
        tmp_path,
    )  # fmt: skip
    assert status == 253, f"booted: {out.decode(errors='replace')}"
    assert b'The Name Server Address[127.0.0.1] illegal, please set it as follows, "127.0.0.1:9876;' in err


@pytest.mark.parametrize("flag", ["-p", "-m"])
async def test_print_config_flags_print_and_exit(tmp_path: Path, flag: str) -> None:
    """mqbroker -p (printConfigItem) and -m (printImportantConfig) print 'name=value' lines and exit 0 without
    starting (both were refused as 'unexpected argument'); -m prints only Java's @ImportantField settings."""
    status, out, err = await _run_broker(
        [flag, "--brokerName", "printed-b", "--storePathRootDir", str(tmp_path / "store")], tmp_path
    )
    assert status == 0, err.decode(errors="replace")[-400:]
    assert b"brokerName=printed-b\n" in out
    assert (b"\nlistenPort=10911\n" in out) == (flag == "-p")


@pytest.mark.parametrize(
    "args",
    [["-n", "a:1;;b:2"], ["-n", "a:port"], ["--namesrvAddr", "a:70000"]],
)
def test_illegal_name_server_addresses_are_refused(args: list[str]) -> None:
    with pytest.raises(PropertiesError, match=r"The Name Server Address\[.*\] illegal"):
        build_config(None, args[2:] if args[0] == "-n" else args, args[1] if args[0] == "-n" else None)


def test_legal_name_server_addresses_pass() -> None:
    assert build_config(None, [], "a:1;[::1]:9876;").namesrv_addr == "a:1;[::1]:9876;"


def test_numbers_are_bound_by_their_java_type(tmp_path: Path) -> None:
    """A Java ``long`` setting takes what an ``int`` one refuses; blanks around a number are ignored."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"transactionTimeOut=3000000000\nmaxMessageSize = 1024 \n")
    config = build_config(str(conf), [], "")
    assert (config.transaction_time_out, config.max_message_size) == (3_000_000_000, 1024)
    # Past their Java type: Integer.parseInt / Long.parseLong refuse them, the settings keep their defaults.
    assert build_config(None, ["--maxMessageSize", "3000000000"], "").max_message_size == 4 << 20
    assert build_config(None, ["--brokerId", str(2**63)], "").broker_id == 0


def test_a_conf_file_with_whitespace_separators_and_escapes_sets_the_keys(tmp_path: Path) -> None:
    """A broker.conf Java starts with as broker 'edge-b' in cluster 'MyCluster', deleteWhen 03."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName edge-b\nbrokerClusterName=My\\u0043luster\nbrokerIP2=10.0.0.1\\\\\ndeleteWhen=03\n")
    config = build_config(str(conf), [], "127.0.0.1:9876")
    assert (config.broker_name, config.broker_cluster_name, config.delete_when) == ("edge-b", "MyCluster", "03")
    assert config.broker_ip2 == "10.0.0.1\\"


def test_a_broker_max_idle_time_of_zero_or_less_disables_the_idle_check(tmp_path: Path) -> None:
    """The broker's listener (NettyRemotingServer too) reads ``serverChannelMaxIdleTimeSeconds`` from broker.conf
    the same way: 0 disables the idle check."""
    conf = tmp_path / "broker.conf"
    conf.write_text("serverChannelMaxIdleTimeSeconds=0\n")
    assert server_config_of(build_config(str(conf), [], "")).idle_timeout is None


async def test_rocketmqs_warm_maped_file_enable_key_warms_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MessageStoreConfig's setting is ``warmMapedFileEnable`` (one ``p``, store/.../config/MessageStoreConfig.java in
    4.9.8 and 5.3.3). A broker.conf with it was warned "ignoring unknown property" and started without warming the
    CommitLog's new segments; ``-p`` printed our own spelling."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nwarmMapedFileEnable=true\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, _):
        assert controller.context.store.config.warm_mapped_file_enable
    assert "warmMapedFileEnable" not in capsys.readouterr().err
    lines = config_lines(build_config(str(conf), [], ""), important_only=False)
    assert "warmMapedFileEnable=true" in lines


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--brokerRole", "ASYNC_MASTER", "--brokerId", "3"], b"\nbrokerId=0\n"),
        (["--brokerRole", "SYNC_MASTER", "--brokerId", "2"], b"\nbrokerId=0\n"),
        (["--brokerRole", "SLAVE", "--brokerId", "2"], b"\nbrokerId=2\n"),
        (["--brokerRole", "SLAVE", "--brokerId", "2", "--enableDLegerCommitLog", "true"], b"\nbrokerId=-1\n"),
    ],
)
@pytest.mark.parametrize("flag", ["-p", "-m"])
async def test_print_config_shows_the_broker_id_brokerstartup_settles(
    tmp_path: Path, flag: str, args: list[str], shown: bytes
) -> None:
    """BrokerStartup applies its role rules before ``-p``/``-m`` print: a master's brokerId is set to 0 and DLedger
    mode's to -1. The configured brokerId was printed, not the one the broker runs with."""
    status, out, err = await _run_broker([flag, *args, "--storePathRootDir", str(tmp_path / "store")], tmp_path)
    assert status == 0, err.decode(errors="replace")[-400:]
    assert shown in b"\n" + out


@pytest.mark.parametrize("flag", ["-p", "-m"])
async def test_print_config_refuses_a_slave_with_broker_id_zero(tmp_path: Path, flag: str) -> None:
    """BrokerStartup stops with "Slave's brokerId must be > 0" before ``-p``/``-m`` print anything; it printed the
    settings and exited 0. Refused as the start refuses it, with BrokerStartup's ``System.exit(-3)``: status 253."""
    status, out, err = await _run_broker(
        [flag, "--brokerRole", "SLAVE", "--brokerId", "0", "--storePathRootDir", str(tmp_path / "store")], tmp_path
    )
    assert status == 253 and b"Slave's brokerId must be > 0" in err
    assert b"brokerId=" not in out


@pytest.mark.parametrize(
    ("args", "ha_port"),
    [(["--listenPort", "20000"], "20001"), (["--listenPort", "20000", "--haListenPort", "30001"], "30001")],
)
def test_print_config_shows_the_ha_address_the_broker_uses(args: list[str], ha_port: str) -> None:
    """BrokerStartup sets haListenPort to listenPort + 1 before ``-p`` prints it, and BrokerConfig defaults brokerIP2
    to the local address as brokerIP1 (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java,
    common/src/main/java/org/apache/rocketmq/common/BrokerConfig.java). Ours printed ``brokerIP2=`` and
    ``haListenPort=0``: not the address slaves are told to replicate from."""
    config = build_config(None, args, "")
    lines = config_lines(printed_config(config), important_only=False)
    assert f"brokerIP2={config.broker_ip1}" in lines
    assert f"haListenPort={ha_port}" in lines
    assert config.ha_server_addr == f"{config.broker_ip1}:{ha_port}"


CONFIG_FILES = ["topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"]


@pytest.mark.parametrize("name", CONFIG_FILES)
async def test_a_corrupt_config_file_without_a_bak_starts_the_broker_empty(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ConfigManager.load (common/src/main/java/org/apache/rocketmq/common/ConfigManager.java) logs "load <file>
    failed, and try to load backup file" and returns loadBak's result, which is true when there is no .bak: the
    broker starts with that table empty. Ours refused to start ("cannot load ...") over a file Java starts past."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / name).write_text("{not json")
    async with broker_from_conf(conf, store) as (controller, _):
        assert "TBW102" in controller.context.topics
    assert any(r.levelname == "ERROR" and name in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", CONFIG_FILES)
async def test_a_corrupt_config_file_and_bak_refuse_the_start(tmp_path: Path, name: str) -> None:
    """loadBak returns false when the .bak does not decode either: BrokerController.initialize fails, the broker
    does not start."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    for file in (name, f"{name}.bak"):
        (store / "config" / file).write_text("{not json")
    config = build_config(str(conf), [f"--storePathRootDir={store}"], "")
    with pytest.raises(BaseException) as raised:  # the start's nurseries may wrap it in exception groups
        await BrokerController(attrs.evolve(config, **SMALL_STORE)).serve()
    found = sole_exception(raised.value)
    assert isinstance(found, ConfigFileError) and name in str(found)


async def test_mqbroker_exits_253_when_a_config_file_and_its_bak_do_not_load(tmp_path: Path) -> None:
    """4.9.8's BrokerStartup calls ``System.exit(-3)`` when ``BrokerController.initialize`` returns false, as it does
    for a config file whose .bak does not load either: scripts and systemd units see status 253 (ours exited 1)."""
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    for file in ("topics.json", "topics.json.bak"):
        (store / "config" / file).write_text("{not json")
    status, out, err = await _run_broker(
        ["-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1", "--storePathRootDir", str(store)],
        tmp_path,
    )
    assert status == 253, f"booted: {out.decode(errors='replace')}"
    assert b"topics.json" in err and b"Traceback" not in err


async def test_use_tls_in_broker_conf_registers_over_tls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BrokerStartup reads broker.conf into NettyClientConfig too (MixAll.properties2Object, broker/src/main/java/org/
    apache/rocketmq/broker/BrokerStartup.java): ``useTLS=true`` makes the broker's client, BrokerOuterAPI, talk TLS to
    its name servers. Ours warned "ignoring unknown property 'useTLS'" and registered in plain text, which a name
    server in enforcing mode closes: the broker never showed up in the routes."""
    namesrv = NamesrvServer(
        NamesrvConfig(
            listen_port=0, listen_host="127.0.0.1", kv_config_path=str(tmp_path / "kv.json"),
            tls_server_mode="enforcing", tls_config_file=str(tmp_path / "none"),
        )
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(namesrv.serve)
        conf = tmp_path / "broker.conf"
        conf.write_text(f"listenPort=0\nlistenHost=127.0.0.1\nnamesrvAddr={host}:{port}\nuseTLS=true\n")
        config = build_config(str(conf), [f"--storePathRootDir={tmp_path / 'store'}"], None)
        broker_host, broker_port = await nursery.start(BrokerController(attrs.evolve(config, **SMALL_STORE)).serve)
        with trio.fail_after(30):
            while namesrv.route_table.live_broker_addrs() != [f"{broker_host}:{broker_port}"]:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert "useTLS" not in capsys.readouterr().err
    assert "useTLS=true" in config_lines(build_config(str(conf), [], ""), important_only=False)


def test_rocketmq_keys_without_effect_in_java_are_not_reported_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RocketMQ 4.9.8's config classes take these keys (MixAll.properties2Object) though nothing reads them, or, for
    ``duplicationEnable`` (store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java), only to hold
    back dispatch at a confirm offset that only a plugin store sets. A broker.conf written for Java with them was
    warned "ignoring unknown property" for each; ``duplicationEnable=true``, which we do not apply, must still say
    so."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "duplicationEnable=false\nmaxDelayTime=40\nflushConsumerOffsetHistoryInterval=60000\nhighSpeedMode=false\n"
        "filterServerNums=0\nputMsgIndexHightWater=600000\nconsumerManagerThreadPoolQueueCapacity=1000000\n"
        "commercialEnable=true\nchannelNotActiveInterval=60000\nclientPooledByteBufAllocatorEnable=false\n"
    )
    config = build_config(str(conf), [], "")
    assert capsys.readouterr().err == ""
    assert "duplicationEnable=false" in config_lines(config, important_only=False)
    build_config(str(conf), ["--duplicationEnable", "true"], "")
    assert "duplicationEnable" in capsys.readouterr().err


@pytest.mark.parametrize(("close", "connections"), [("true", 4), ("false", 1)])
async def test_client_close_socket_if_timeout_from_broker_conf(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, close: str, connections: int
) -> None:
    """NettyClientConfig's ``clientCloseSocketIfTimeout`` (default true), which BrokerStartup reads from broker.conf
    (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java), decides whether BrokerOuterAPI's client
    closes a connection whose request timed out (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    NettyRemotingClient.java ``invokeSync``). Against a name server that never answers, ``false`` keeps registering
    on the one connection; ours ignored the key (unknown property) and always closed and reconnected."""
    accepted = 0

    async def silent(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        while await stream.receive_some():
            pass

    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort=0\nlistenHost=127.0.0.1\nnamesrvAddr=127.0.0.1:{port}\nclientCloseSocketIfTimeout={close}\n"
            # no transaction check round: its first creates the half topic, which registers once more
            "transactionCheckInterval=600000\n"
        )
        config = build_config(str(conf), [f"--storePathRootDir={tmp_path / 'store'}"], None)
        await nursery.start(BrokerController(attrs.evolve(config, **SMALL_STORE)).serve)
        await trio.sleep(75)  # registrations at the start, 10 s later, then each 30 s: four, each timing out
        assert accepted == connections
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("", "true"),
        ("useTLS=false\n", "false"),
        ("tls.enable=false\n", "false"),
        ("tls.enable=false\nuseTLS=true\n", "true"),
    ],
    ids=["default", "use-tls-false", "tls-enable-false", "use-tls-true"],
)
async def test_get_broker_config_and_print_show_the_use_tls_the_broker_uses(
    tmp_path: Path, written: str, shown: str
) -> None:
    """Java's NettyClientConfig, whose ``useTLS`` BrokerStartup sets to ``tls.enable`` (default: whether the mode
    is enforcing) before broker.conf may set it, is one of the objects ``-p`` prints and the broker's Configuration
    answers GET_BROKER_CONFIG with (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java,
    BrokerController.java ``new Configuration``). Ours answered GET_BROKER_CONFIG without the default applied
    (``useTLS=false`` on an enforcing broker talking TLS), and ``-p`` printed true for an explicit false."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort=0\nlistenHost=127.0.0.1\ntls.server.mode=enforcing\ntls.config.file={tmp_path / 'none'}\n{written}"
    )
    assert f"useTLS={shown}" in config_lines(printed_config(build_config(str(conf), [], "")), important_only=False)
    async with (
        broker_from_conf(conf, tmp_path / "store") as (_, addr),
        RemotingClient(ssl_context=client_context()) as client,
    ):
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
    assert f"useTLS={shown}" in bytes(answer.body).decode().splitlines()


async def test_get_broker_config_shows_the_ha_address_the_broker_registers(tmp_path: Path) -> None:
    """Java's BrokerConfig defaults brokerIP2 to the local address, as brokerIP1 (common/src/main/java/org/apache/
    rocketmq/common/BrokerConfig.java), and the broker's Configuration answers GET_BROKER_CONFIG with it: the host
    of the HA address slaves are given. Ours registered ``brokerIP1``'s host for HA but answered ``brokerIP2=``,
    though ``-p`` prints the address in use."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
        ha_host, _, ha_port = controller.context.config.ha_server_addr.rpartition(":")
    lines = bytes(answer.body).decode().splitlines()
    assert f"brokerIP2={ha_host}" in lines and ha_host == "127.0.0.1"
    assert f"haListenPort={ha_port}" in lines


async def test_get_broker_config_omits_the_settings_java_leaves_null(tmp_path: Path) -> None:
    """4.9.8's Configuration answers GET_BROKER_CONFIG with ``MixAll.object2Properties`` of each config object, which
    skips a null field, and ``properties2String``, which skips a null value: a broker started without a name server
    shows no ``namesrvAddr`` line, nor the MessageStoreConfig paths and DLedger names that default to null
    (store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java). Ours showed them empty (``key=``),
    which a tool reading the text takes for a value. A set one is shown, and an empty default that is not null
    (``messageStorePlugIn=``) stays."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nhaMasterAddress=10.0.0.9:10912\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_controller, addr), RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
    keys = {line.partition("=")[0]: line.partition("=")[2] for line in bytes(answer.body).decode().splitlines()}
    null_by_default = (
        "namesrvAddr",
        "storePathCommitLog",
        "storePathDLedgerCommitLog",
        "readOnlyCommitLogStorePaths",
        "dLegerGroup",
        "dLegerPeers",
        "dLegerSelfId",
        "preferredLeaderId",
    )
    assert [key for key in null_by_default if key in keys] == []
    assert keys["haMasterAddress"] == "10.0.0.9:10912"
    assert keys["messageStorePlugIn"] == ""


#: RocketMQ 4.9.8 keys of BrokerConfig, MessageStoreConfig, NettyServerConfig and NettyClientConfig with their Java
#: defaults, as a broker.conf copied from a Java broker (or `mqbroker -p`'s output) holds them.
JAVA_ONLY_KEYS = """transferMsgByHeap=true
messageStorePlugIn=
putMessageFutureThreadPoolNums=4
putThreadPoolQueueCapacity=10000
fetchNamesrvAddrByAddressServer=false
commercialBaseCount=1
enableCalcFilterBitMap=false
expectConsumerNumUseFilter=32
maxErrorRateOfBloomFilter=20
filterDataCleanTimeSpan=86400000
enableDetailStat=true
autoDeleteUnusedStats=false
isolateLogEnable=false
debugLockEnable=false
diskFallRecorded=true
enableConsumeQueueExt=false
mappedFileSizeConsumeQueueExt=50331648
bitMapLengthConsumeQueueExt=64
redeleteHangedFileInterval=120000
messageIndexSafe=false
flushLeastPagesWhenWarmMapedFile=4096
transientStorePoolEnable=false
transientStorePoolSize=5
commitIntervalCommitLog=200
commitCommitLogLeastPages=4
commitCommitLogThoroughInterval=200
fastFailIfNoBufferInStorePool=false
useReentrantLockWhenPutMessage=true
enableScheduleMessageStats=true
enableScheduleAsyncDeliver=false
scheduleAsyncDeliverMaxPendingLimit=2000
scheduleAsyncDeliverMaxResendNum2Blocked=3
serverWorkerThreads=8
serverCallbackExecutorThreads=0
serverSelectorThreads=3
serverOnewaySemaphoreValue=256
serverAsyncSemaphoreValue=64
serverSocketSndBufSize=0
serverSocketRcvBufSize=0
serverSocketBacklog=1024
serverPooledByteBufAllocatorEnable=true
useEpollNativeSelector=false
writeBufferHighWaterMark=0
writeBufferLowWaterMark=0
clientWorkerThreads=4
clientCallbackExecutorThreads=2
clientOnewaySemaphoreValue=65535
clientAsyncSemaphoreValue=65535
clientSocketSndBufSize=0
clientSocketRcvBufSize=0
"""


def test_java_broker_conf_keys_without_an_equivalent_here_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every setting RocketMQ 4.9.8's BrokerStartup reads from broker.conf (MixAll.properties2Object into
    common/.../BrokerConfig.java, store/.../config/MessageStoreConfig.java, remoting/.../netty/NettyServerConfig.java
    and NettyClientConfig.java) is a key a copied Java broker.conf may hold. Ours warned "ignoring unknown property"
    for each of these (threads, Netty buffers and semaphores, the transient store pool, async schedule delivery...),
    as for a typo."""
    conf = tmp_path / "broker.conf"
    conf.write_text(JAVA_ONLY_KEYS)
    build_config(str(conf), [], "")
    assert capsys.readouterr().err == ""


async def test_get_broker_config_and_mqbroker_p_show_the_java_keys_without_an_equivalent(tmp_path: Path) -> None:
    """BrokerController's Configuration holds RocketMQ 4.9.8's four config objects (BrokerConfig, NettyServerConfig,
    NettyClientConfig, MessageStoreConfig) and GET_BROKER_CONFIG answers every field of them with its value
    (common/src/main/java/org/apache/rocketmq/common/Configuration.java getAllConfigsFormatString); BrokerStartup's
    ``-p`` prints them all, ``-m`` the ``@ImportantField`` ones. Ours accepted the Java-only keys (threads, Netty
    buffers, the transient store pool...) but showed none of them: ``mqadmin getBrokerConfig`` listed fewer keys
    than a Java broker's, and a value the file gave was nowhere to be seen."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nserverSelectorThreads=5\ntransientStorePoolEnable=true\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
    shown = dict(line.split("=", 1) for line in bytes(answer.body).decode().splitlines())
    java_defaults = dict(line.split("=", 1) for line in JAVA_ONLY_KEYS.splitlines())
    java_defaults["clientCallbackExecutorThreads"] = str(available_cpus())
    java_defaults["putMessageFutureThreadPoolNums"] = str(min(available_cpus(), 4))
    java_defaults |= {"serverSelectorThreads": "5", "transientStorePoolEnable": "true"}
    assert {key: shown.get(key) for key in java_defaults} == java_defaults
    assert {key: shown.get(key) for key in ("commercialEnable", "maxDelayTime", "channelNotActiveInterval")} == {
        "commercialEnable": "true",
        "maxDelayTime": "40",
        "channelNotActiveInterval": "60000",
    }
    config = printed_config(build_config(str(conf), [], ""))
    printed = config_lines(config, important_only=False)
    assert "serverSelectorThreads=5" in printed and "useEpollNativeSelector=false" in printed
    important = config_lines(config, important_only=True)
    for line in ("transientStorePoolEnable=true", "commitIntervalCommitLog=200", "messageIndexSafe=false"):
        assert line in important
    assert "fetchNamesrvAddrByAddressServer=false" in important


async def test_update_broker_config_of_a_java_key_without_an_equivalent_is_kept_and_written_back(
    tmp_path: Path,
) -> None:
    """UPDATE_BROKER_CONFIG is Configuration.update: properties2Object sets the key in whichever of the four config
    objects has it, then persist() writes the configuration to the ``-c`` file (common/src/main/java/org/apache/
    rocketmq/common/Configuration.java), so GET_BROKER_CONFIG shows the new value and a restart keeps it. Ours
    dropped such a key as unknown: the update answered SUCCESS, yet neither the broker nor the file had it."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        body = b"serverWorkerThreads=16\ntransientStorePoolSize=9\n"
        assert (await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)).code == 0
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
    lines = bytes(answer.body).decode().splitlines()
    assert "serverWorkerThreads=16" in lines and "transientStorePoolSize=9" in lines
    assert conf.read_text() == "listenPort=0\nlistenHost=127.0.0.1\nserverWorkerThreads=16\ntransientStorePoolSize=9\n"
    restarted = config_lines(build_config(str(conf), [], ""), important_only=False)
    assert "serverWorkerThreads=16" in restarted and "transientStorePoolSize=9" in restarted


async def test_get_broker_config_shows_the_conf_files_keys_no_setting_has_and_an_update_keeps_them(
    tmp_path: Path,
) -> None:
    """BrokerStartup hands the ``-c`` file's properties to ``Configuration.registerConfig``, which merges every key of
    the file into the configuration it answers GET_BROKER_CONFIG with, whether a config object has it or not; an
    UPDATE_BROKER_CONFIG changes such a key (``mergeIfExist``: one the configuration holds) and ``persist()`` writes
    it, while a key neither the objects nor the file have is dropped (common/src/main/java/org/apache/rocketmq/
    common/Configuration.java, broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java). Ours showed only
    its fields: a key a newer RocketMQ reads (``enableSlaveActingMaster``) or a misspelt one was nowhere to be seen,
    and an update of it was dropped."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nenableSlaveActingMaster=true\nbrokerNmae=typo\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        before = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
        body = b"enableSlaveActingMaster=false\nneverConfigured=1\n"
        assert (await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)).code == 0
        after = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
    shown = bytes(before.body).decode().splitlines()
    assert "enableSlaveActingMaster=true" in shown and "brokerNmae=typo" in shown
    shown = bytes(after.body).decode().splitlines()
    assert "enableSlaveActingMaster=false" in shown and "brokerNmae=typo" in shown
    assert not any(line.startswith("neverConfigured=") for line in shown)
    expected = "listenPort=0\nlistenHost=127.0.0.1\nenableSlaveActingMaster=false\nbrokerNmae=typo\n"
    assert conf.read_text() == expected


async def test_server_socket_backlog_in_broker_conf_sizes_the_listen_backlog(tmp_path: Path) -> None:
    """``serverSocketBacklog`` is NettyServerConfig's ``SO_BACKLOG`` (remoting/src/main/java/org/apache/rocketmq/
    remoting/netty/NettyRemotingServer.java ``.option(ChannelOption.SO_BACKLOG, ...)``). It was accepted, shown and
    persisted, but every listener kept a backlog of 1024."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nserverSocketBacklog=7\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, address):
        assert listen_backlog(int(address.rsplit(":", 1)[1])) == 7


async def test_print_config_prints_in_javas_field_order(tmp_path: Path) -> None:
    """``mqbroker -p`` prints BrokerConfig's fields, then NettyServerConfig's, NettyClientConfig's and
    MessageStoreConfig's, each in its class's declaration order (broker/src/main/java/org/apache/rocketmq/broker/
    BrokerStartup.java calls MixAll.printObjectProperties, which walks ``getDeclaredFields``, on each in turn); ours
    printed our own field order (the ``tls.*`` keys first, listenPort after the store's settings), so the lines of a
    Java broker's ``-p`` and ours could not be compared. Keys of ours that Java lacks come after Java's."""
    status, out, err = await _run_broker(["-p", "--storePathRootDir", str(tmp_path / "store")], tmp_path)
    assert status == 0, err.decode(errors="replace")[-400:]
    keys = [line.split("=", 1)[0] for line in out.decode().splitlines()]
    assert keys[:7] == ["rocketmqHome", "namesrvAddr", "brokerIP1", "brokerIP2", "brokerName", "brokerClusterName",
                        "brokerId"]  # fmt: skip
    sections = [
        "configBlackList", "listenPort", "useEpollNativeSelector", "clientWorkerThreads", "useTLS",
        "storePathRootDir", "brokerRole", "scheduleAsyncDeliverMaxResendNum2Blocked", "tls.server.mode",
    ]  # fmt: skip
    positions = [keys.index(key) for key in sections]
    assert positions == sorted(positions)
    assert keys.index("configBlackList") == keys.index("listenPort") - 1
    assert keys.index("useTLS") == keys.index("storePathRootDir") - 1


async def test_server_socket_buffer_sizes_in_broker_conf_size_each_connections_buffers(tmp_path: Path) -> None:
    """``serverSocketSndBufSize``/``serverSocketRcvBufSize`` above 0 are each accepted connection's SO_SNDBUF and
    SO_RCVBUF (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingServer.java ``childOption``;
    Linux doubles the value it is given). They were accepted, shown and persisted, and the OS's sizes kept."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nserverSocketSndBufSize=24576\nserverSocketRcvBufSize=20480\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, address):
        host, port = address.rsplit(":", 1)
        peer = await RawPeer.connect((host, int(port)))
        await peer.send(request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
        assert await peer.receive() is not None  # served: the connection is the broker's accepted one
        assert accepted_buffer_sizes(int(port)) == (2 * 20480, 2 * 24576)
        await peer.aclose()
