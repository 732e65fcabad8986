"""A stored batch's index entries, hashed from the written records (``MessageStore._index_written``), are the
entries the per-message keys give (``index_keys_of_raw`` of each message's properties, then
``IndexService.put_batch``, as RocketMQ's ``IndexService.buildIndex`` indexes UNIQ_KEY and each KEYS token):
the same index files, byte for byte, on the C build and with ``ROCKETRIO_PURE_PYTHON=1``."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import encode_properties, index_keys_of_raw
from store.index import IndexService
from tests.store.store_helpers import BORN_HOST, STORE_HOST, files_of, open_store, python_append

TX_PREPARED, TX_ROLLBACK = 0x4, 0xC
GEOMETRY = {"mapped_file_size_commit_log": 64 * 1024, "max_hash_slot_num": 8, "max_index_num": 40}
#: ASCII, non-ASCII (the scan leaves those records to ``put_batch``) and the KEYS separator
TEXT = st.text(alphabet="ab7_ é中", max_size=8)
PROPS = st.fixed_dictionaries(
    {},
    optional={"KEYS": TEXT, "UNIQ_KEY": TEXT, "TAGS": TEXT, "a": TEXT},
)
MESSAGE = st.tuples(PROPS, st.sampled_from([0, 0, 0, 0, TX_PREPARED, TX_ROLLBACK]))
BATCHES = st.lists(
    st.tuples(st.sampled_from(["TopicA", "TopicB"]), st.lists(MESSAGE, min_size=1, max_size=6)),
    min_size=1,
    max_size=8,
)


def _record(topic: str, props: dict[str, str], sys_flag: int, n: int) -> MessageRecord:
    return MessageRecord(topic=topic, body=b"m%d" % n, queue_id=0, sys_flag=sys_flag,
                         properties=encode_properties(dict(props)), born_timestamp=1_700_000_000_000,
                         born_host=BORN_HOST, store_host=STORE_HOST)  # fmt: skip


def _index_files_both_ways(root: Path, batches: list[tuple[str, list[tuple[dict[str, str], int]]]],
                           python: bool, entries: bool = False) -> tuple[list[bytes], list[bytes]]:  # fmt: skip
    store = open_store(root / "store", **GEOMETRY)
    if python:
        python_append(store)
    reference = IndexService(root / "reference", GEOMETRY["max_hash_slot_num"], GEOMETRY["max_index_num"])
    reference.load()
    n = 0
    for topic, messages in batches:
        records = [_record(topic, props, flag, n + i) for i, (props, flag) in enumerate(messages)]
        n += len(records)
        if entries:  # the broker's batch send: a template and (body, properties, flag) per message
            result = store.append_entries(records[0], [(r.body, r.properties, r.flag) for r in records])
        else:
            result = store.append_batch(records)
        # today's way: each message's keys from its properties text, one put_batch for the batch
        keyed = [(index_keys_of_raw(r.properties.encode()), phy) for r, phy in zip(records, result.phy_offsets,
                                                                                   strict=True)]  # fmt: skip
        reference.put_batch(topic, keyed, result.store_timestamp)
    store.close()
    reference.close()
    return list(files_of(root / "store" / "index").values()), list(files_of(root / "reference" / "index").values())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BATCHES, st.sampled_from(["c", "python", "entries"]))
def test_a_batch_is_indexed_from_its_records_as_from_its_keys(
    batches: list[tuple[str, list[tuple[dict[str, str], int]]]], path: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        written, expected = _index_files_both_ways(Path(tmp), batches, path == "python", path == "entries")
    assert written == expected


def test_the_same_files_when_batches_roll_the_index_and_mix_plain_and_other_records(tmp_path: Path) -> None:
    plain = [({"KEYS": "k1 k2", "UNIQ_KEY": f"u{i}"}, 0) for i in range(10)]
    mixed = [({"KEYS": "a b"}, 0), ({"KEYS": "é"}, 0), ({"UNIQ_KEY": "x"}, TX_ROLLBACK), ({"KEYS": "c"}, 0)]
    written, expected = _index_files_both_ways(tmp_path, [("TopicA", plain), ("TopicB", mixed)] * 3, False)
    assert len(written) >= 2 and written == expected  # 105 entries over files of 39
