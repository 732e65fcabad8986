"""``mqdashboard``: the web dashboard, served by Hypercorn's Trio worker.

    mqdashboard -n 127.0.0.1:9876               # http://127.0.0.1:8080/
    mqdashboard -c dashboard.properties --port 0  # a free port; the line printed says which

Settings come from ``-c`` (rocketmq-dashboard's property names, :mod:`dashboard.settings`), ``NAMESRV_ADDR`` and the
options below. Once listening it prints ``mqdashboard listening on http://HOST:PORT/``; SIGINT, SIGTERM or SIGHUP shut
it down cleanly. A bad setting prints the error and exits with status 2; a port that cannot be bound, one line and
status 1.
"""

from __future__ import annotations

import functools
import os
import sys

import click
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from dashboard.app import create_app
from dashboard.settings import DashboardSettings, SettingsError, load_settings
from remoting.server_main import open_stop_signal_receiver, run_main, take_stop_signals


async def run(settings: DashboardSettings) -> None:
    """Serve until a stop signal (:func:`~remoting.server_main.open_stop_signal_receiver`)."""
    app = create_app(settings)
    config = Config()
    config.bind = [f"{settings.host}:{settings.port}"]
    config.accesslog = None
    config.graceful_timeout = 2.0
    stop = trio.Event()

    async def on_signals() -> None:
        with open_stop_signal_receiver() as signals:
            async for _ in signals:
                stop.set()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signals)
        # serve returns once the shutdown trigger has fired and its connections are closed.
        # Hypercorn's framework type is narrower than Starlette's ASGI signature, which it serves all the same.
        served = functools.partial(serve, app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
        binds = await nursery.start(served)
        for bind in binds:
            print(f"mqdashboard listening on {bind}/", flush=True)
    print("mqdashboard stopped.", flush=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-n", "--namesrvAddr", "namesrv_addr", help="name servers, host:port;host:port [env NAMESRV_ADDR]")
@click.option("-c", "--configFile", "config_file", type=click.Path(dir_okay=False), help="properties file")
@click.option("--host", help="address to listen on [default 127.0.0.1]")
@click.option("--port", type=click.IntRange(0, 65535), help="port to listen on, 0 for any [default 8080]")
@click.option("--sample-interval", type=float, help="seconds between chart samples [default 60]")
@click.option("--login-required/--no-login-required", default=None, help="ask for a user of the users file")
@click.option("--users-file", type=click.Path(dir_okay=False), help="name=password[,1] lines (1: administrator)")
def main(
    namesrv_addr: str | None,
    config_file: str | None,
    host: str | None,
    port: int | None,
    sample_interval: float | None,
    login_required: bool | None,
    users_file: str | None,
) -> None:
    """The rocketrio web dashboard."""
    take_stop_signals()
    try:
        settings = load_settings(
            config_file,
            dict(os.environ),
            namesrv_addr=namesrv_addr,
            host=host,
            port=port,
            sample_interval=sample_interval,
            login_required=login_required,
            users_file=users_file,
        )
        create_app(settings)  # checks the settings the app needs before binding
    except (SettingsError, OSError) as exc:
        click.echo(f"mqdashboard: {exc}", err=True)
        sys.exit(2)
    run_main(
        run,
        settings,
        failures=(OSError,),  # Hypercorn's bind failure
        describe=lambda failure: f"mqdashboard: cannot listen on {settings.host}:{settings.port}: {failure}",
    )


if __name__ == "__main__":
    main()
