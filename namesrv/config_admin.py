"""The name server's settings at run time: UPDATE_NAMESRV_CONFIG (318) and GET_NAMESRV_CONFIG (319), as RocketMQ
4.9.8's ``Configuration`` behind ``DefaultRequestProcessor.updateConfig``/``getConfig``
(``namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/DefaultRequestProcessor.java``).

:class:`NamesrvConfigAdmin` owns the current :class:`~namesrv.config.NamesrvConfig`. An update applies a properties
text: a key of :data:`ALWAYS_BLACK_LISTED` or of ``configBlackList`` refuses the whole update with NO_PERMISSION
(``DefaultRequestProcessor.initConfigBlackList``: the configured list only adds keys), unknown keys are ignored
(as Java's reflection ignores them) unless the ``-c`` file had the key (``file_only_properties``, kept and shown as
Java's ``registerConfig`` keeps the file's properties), the ``tls.*`` ones always, the rest replace the config, the
``on_change`` callback hands the new config to whoever uses it live (``orderMessageEnable`` takes effect at once,
``serverChannelMaxIdleTimeSeconds`` for the connections accepted afterwards; ports and other timers at the next
start), and every setting (and file key) is written to ``configStorePath`` as ``key=value`` lines (Java's
``Configuration.persist``).

``tls.*`` are JVM system properties in RocketMQ (TlsSystemConfig), no field of the NamesrvConfig and
NettyServerConfig that NamesrvController registers: GET_NAMESRV_CONFIG shows, and the file gets, only the ``tls.*``
keys the ``-c`` file held when the admin was created (``mqnamesrv -c FILE``: NamesrvStartup's
``registerConfig(properties)``; none without ``-c``, whatever the ``configStorePath`` file holds), with the file's
text; a TLS key password among them is written back, never shown.
A bad value answers SYSTEM_ERROR with the parser's message (a body ``Properties.load`` refuses: Java's
"string2Properties error") and changes nothing; a failed write is logged (the running
server already uses the new values).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

import trio

from namesrv.config import NamesrvConfig, properties_without_setting
from remoting.codec.java_properties import (
    apply_properties,
    black_listed_keys,
    format_properties,
    parse_properties,
    property_texts,
)
from remoting.tls import SYSTEM_PROPERTY_PREFIX, held_tls_texts, tls_properties_in
from store.metadata_files import replace_atomically

__all__ = ["ALWAYS_BLACK_LISTED", "SYSTEM_PROPERTY_PREFIX", "NamesrvConfigAdmin"]

#: Keys Java black-lists whatever ``configBlackList`` says.
ALWAYS_BLACK_LISTED: Final = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})

log = logging.getLogger(__name__)


class ConfigRefused(Exception):
    """An update with a black-listed key (NO_PERMISSION)."""


class NamesrvConfigAdmin:
    """See the module docstring. Runs on the Trio thread; the file is written in a worker thread."""

    def __init__(
        self,
        config: NamesrvConfig,
        on_change: Callable[[NamesrvConfig], None] | None = None,
        config_file: Path | None = None,
    ) -> None:
        """``config_file``: the ``mqnamesrv -c`` file, if any."""
        self.config = config
        #: The ``-c`` file's keys no setting has, with their text: NamesrvStartup registers the file's properties with
        #: Configuration (``registerConfig``), which shows and persists them, and an update changes one of them
        #: (``mergeIfExist``; common/src/main/java/org/apache/rocketmq/common/Configuration.java). None without
        #: ``-c``: Configuration never reads its ``configStorePath`` file.
        self.file_only_properties = properties_without_setting(config_file) if config_file else {}
        #: The ``tls.*`` keys of the ``-c`` file, with their text (see the module docstring).
        self.file_tls_properties = tls_properties_in(config_file) if config_file else {}
        self._on_change = on_change
        self._write_lock = trio.Lock()  # one write at a time, in arrival order (Java's Configuration write lock)

    def texts(self, *, secrets: bool = False) -> dict[str, str]:
        """Every setting (and file key) by property name, ``tls.*`` ones only as the file held them; ``secrets``: a
        TLS key password too."""
        settings = held_tls_texts(property_texts(self.config), self.file_tls_properties, secrets=secrets)
        return {**self.file_only_properties, **settings}

    def formatted(self) -> str:
        """Every setting as ``key=value`` lines (GET_NAMESRV_CONFIG's body)."""
        return format_properties(self.texts())

    async def update(self, text: str) -> list[str]:
        """Apply a properties text; returns the keys no setting has. Raises :class:`ConfigRefused` for a black-listed
        key and :class:`~remoting.codec.java_properties.PropertiesError` for a bad value."""
        props = parse_properties(text)
        if black_listed_keys(ALWAYS_BLACK_LISTED, self.config.config_black_list) & props.keys():
            raise ConfigRefused("Can not update config in black list.")
        ignored = sorted(key for key in props if key.startswith(SYSTEM_PROPERTY_PREFIX))
        props = {key: value for key, value in props.items() if key not in ignored}
        self.config, unknown = apply_properties(self.config, props)
        held = {key: props[key] for key in unknown if key in self.file_only_properties}  # Configuration.mergeIfExist
        self.file_only_properties.update(held)
        unknown = [key for key in unknown if key not in held] + ignored
        if self._on_change is not None:
            self._on_change(self.config)
        path = Path(self.config.config_store_path).expanduser()
        try:
            async with self._write_lock:
                await trio.to_thread.run_sync(_write, path, self.texts(secrets=True))
        except OSError as exc:
            log.warning("cannot persist the name server config to %s: %s", path, exc)
        return unknown


def _write(path: Path, texts: dict[str, str]) -> None:
    """``texts`` as the file at ``path`` (Java's ``MixAll.string2File``: the parent directories made), keeping the
    old file's permissions: it may hold a TLS key password (Java's new file gets the default ones)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = format_properties(texts).encode("latin-1")
    replace_atomically(path, data, path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp"), keep_mode=True)
