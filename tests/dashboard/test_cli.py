"""``mqdashboard`` as the process ``make run`` starts: it finds the name server from ``NAMESRV_ADDR``, prints where it
listens, serves the cluster, and stops cleanly on SIGTERM; a bad setting exits with status 2 before binding."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from broker.embedded import EmbeddedCluster

MQDASHBOARD = str(Path(sys.executable).parent / "mqdashboard")


async def _line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> str:
    """The next line of ``stream`` (what is read past it stays in ``buffer``)."""
    while b"\n" not in buffer:
        chunk = await stream.receive_some()
        assert chunk, f"mqdashboard ended its output early: {buffer!r}"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


async def test_mqdashboard_serves_the_cluster_and_stops_on_sigterm(embedded_cluster: EmbeddedCluster) -> None:
    env = {**os.environ, "NAMESRV_ADDR": embedded_cluster.namesrv_addr}
    proc = await trio.lowlevel.open_process([MQDASHBOARD, "--port", "0"], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    buffer = bytearray()
    try:
        with trio.fail_after(60):
            listening = await _line(proc.stdout, buffer)
        assert listening.startswith("mqdashboard listening on http://127.0.0.1:"), listening
        url = listening.removeprefix("mqdashboard listening on ").rstrip("/")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.get("/")).headers["location"] == "/cluster"
            [broker] = (await http.get("/api/cluster")).json()["brokers"]
            assert broker["address"] == embedded_cluster.broker_addr
            assert "Consumer groups" in (await http.get("/cluster")).text
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await proc.wait() == 0
            assert await _line(proc.stdout, buffer) == "mqdashboard stopped."
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_a_bad_setting_exits_with_status_2_before_binding(tmp_path: Path) -> None:
    properties = tmp_path / "dashboard.properties"
    properties.write_text("rocketmq.config.namesrvAddr=127.0.0.1:9876\nrocketmq.config.noSuchThing=1\n")
    done = subprocess.run(
        [MQDASHBOARD, "-c", str(properties), "--port", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "unknown property 'rocketmq.config.noSuchThing'" in done.stderr
    assert "listening" not in done.stdout


def _first_line(properties: Path) -> tuple[str, int | None, str]:
    """``mqdashboard -c properties``'s first line of output, then its status and stderr if it exited (else killed:
    None, "")."""
    argv = [MQDASHBOARD, "-c", str(properties), "--port", "0"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        if line:
            proc.kill()
            return line, None, ""
        return line, proc.wait(timeout=60), proc.stderr.read()


def test_https_settings_stop_the_start_rather_than_serve_plain_http(tmp_path: Path) -> None:
    """rocketmq-dashboard is a Spring Boot application: any ``server.ssl.*`` setting (a key store) makes it serve
    HTTPS, unless ``server.ssl.enabled=false``. This dashboard serves HTTP only and ignored them, so the logins and
    cookies a user meant to encrypt went in the clear: it now refuses to start, saying so."""
    properties = tmp_path / "dashboard.properties"
    properties.write_text(
        "rocketmq.config.namesrvAddr=127.0.0.1:1\nserver.ssl.key-store=classpath:rmqcngkeystore.jks\n"
    )
    line, status, err = _first_line(properties)
    assert (line, status) == ("", 2) and "server.ssl.key-store" in err and "HTTPS" in err, (line, err)
    properties.write_text("rocketmq.config.namesrvAddr=127.0.0.1:1\nserver.ssl.enabled=false\nserver.ssl.key-store=x\n")
    assert _first_line(properties)[0].startswith("mqdashboard listening on http://")
