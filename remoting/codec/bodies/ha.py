"""GET_BROKER_HA_STATUS (907) body: RocketMQ 5.3.3's ``HARuntimeInfo``
(remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/HARuntimeInfo.java), with its nested
``HAConnectionRuntimeInfo`` (one per slave connected to a master) and ``HAClientRuntimeInfo`` (a slave's view of its
master). Keys are fastjson's getter names (``isMaster``/``isInSync`` write ``master``/``inSync``; the client's
``isActivated`` has no getter and is never written); a null ``masterAddr`` is left out. Decoders raise
:class:`~remoting.codec.bodies.BodyDecodeError`.
"""

from __future__ import annotations

from typing import Any

import attrs

from remoting.codec.bodies._json import (
    dumps,
    expect_object,
    get_bool,
    get_int,
    get_list,
    get_str,
    load_object,
)

__all__ = ["HAClientRuntimeInfo", "HAConnectionRuntimeInfo", "HARuntimeInfo"]


@attrs.frozen
class HAConnectionRuntimeInfo:
    """One slave as its master sees it: ``diff`` is the master's end less ``slave_ack_offset``."""

    addr: str = ""
    slave_ack_offset: int = 0
    diff: int = 0
    in_sync: bool = False
    transferred_byte_in_second: int = 0
    transfer_from_where: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "addr": self.addr,
            "diff": self.diff,
            "inSync": self.in_sync,
            "slaveAckOffset": self.slave_ack_offset,
            "transferFromWhere": self.transfer_from_where,
            "transferredByteInSecond": self.transferred_byte_in_second,
        }

    @classmethod
    def from_json(cls, obj: object) -> HAConnectionRuntimeInfo:
        o = expect_object(obj or {}, "HAConnectionRuntimeInfo")
        return cls(
            get_str(o, "addr") or "",
            get_int(o, "slaveAckOffset"),
            get_int(o, "diff"),
            get_bool(o, "inSync"),
            get_int(o, "transferredByteInSecond"),
            get_int(o, "transferFromWhere"),
        )


@attrs.frozen
class HAClientRuntimeInfo:
    """A slave's view: its master's HA address, its own CommitLog end, the last read from and write to the master
    (epoch ms) and the master's flushed offset."""

    master_addr: str | None = None
    transferred_byte_in_second: int = 0
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "lastReadTimestamp": self.last_read_timestamp,
            "lastWriteTimestamp": self.last_write_timestamp,
            "masterFlushOffset": self.master_flush_offset,
            "maxOffset": self.max_offset,
            "transferredByteInSecond": self.transferred_byte_in_second,
        }
        if self.master_addr is not None:
            out["masterAddr"] = self.master_addr
        return out

    @classmethod
    def from_json(cls, obj: object) -> HAClientRuntimeInfo:
        o = expect_object(obj or {}, "HAClientRuntimeInfo")
        return cls(
            get_str(o, "masterAddr"),
            get_int(o, "transferredByteInSecond"),
            get_int(o, "maxOffset"),
            get_int(o, "lastReadTimestamp"),
            get_int(o, "lastWriteTimestamp"),
            get_int(o, "masterFlushOffset"),
        )


@attrs.frozen
class HARuntimeInfo:
    """A broker's replication state: a master's slaves (``master``), or a slave's client view. Java always writes
    both nested parts, the unused one empty."""

    master: bool = False
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: tuple[HAConnectionRuntimeInfo, ...] = ()
    ha_client_runtime_info: HAClientRuntimeInfo = HAClientRuntimeInfo()

    def encode(self) -> bytes:
        return dumps(
            {
                "haClientRuntimeInfo": self.ha_client_runtime_info.to_json(),
                "haConnectionInfo": [c.to_json() for c in self.ha_connection_info],
                "inSyncSlaveNums": self.in_sync_slave_nums,
                "master": self.master,
                "masterCommitLogMaxOffset": self.master_commit_log_max_offset,
            }
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> HARuntimeInfo:
        o = load_object(data, "HARuntimeInfo")
        return cls(
            get_bool(o, "master"),
            get_int(o, "masterCommitLogMaxOffset"),
            get_int(o, "inSyncSlaveNums", bits=32),
            tuple(HAConnectionRuntimeInfo.from_json(c) for c in get_list(o, "haConnectionInfo")),
            HAClientRuntimeInfo.from_json(o.get("haClientRuntimeInfo")),
        )
