"""A ``rocketmq`` sink whose driver-side commit fails once: the first commit of a query raises after every task has
published, as a driver crash or a commit-time error would. A flag file (option ``failFlag``) remembers that the
failure happened, because Spark creates a fresh writer in a fresh Python worker for every commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from spark.options import SourceOptions
from spark.source import RocketMQDataSource
from spark.stream_writer import RocketMQStreamWriter


class InjectedCommitFailure(RuntimeError):
    pass


class FailOnceWriter(RocketMQStreamWriter):
    def __init__(self, options: SourceOptions, flag: Path) -> None:
        super().__init__(options)
        self.flag = flag

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if not self.flag.exists():
            self.flag.write_text(f"failed batch {batchId}")
            raise InjectedCommitFailure(f"injected failure committing batch {batchId}")
        super().commit(messages, batchId)


class FailOnceCommitSource(RocketMQDataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq_fail_once_commit"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        super().streamWriter(schema, overwrite)  # the same planning checks
        return FailOnceWriter(self.parsed, Path(self.options["failFlag"]))
