"""The store's property filter: properties sliced straight from stored records (IPv4 and IPv6 hosts), candidates
refused by the filter skipped but scanned, after the tag filter."""

from __future__ import annotations

from pathlib import Path

import attrs
from hypothesis import given
from hypothesis import strategies as st

from processors.filter import compile_sql92
from remoting.codec.message import MessageRecord, encode_record
from remoting.codec.message_properties import encode_properties, java_string_hash
from remoting.codec.msgid import pack_socket_address
from store.get_message import record_properties
from store.results import GetStatus
from tests.store.store_helpers import message, open_store

V4 = pack_socket_address("10.0.0.7", 40000)
V6 = pack_socket_address("fe80::1", 40000)


@given(
    born=st.sampled_from((V4, V6)),
    stored=st.sampled_from((V4, V6)),
    body=st.binary(max_size=300),
    topic=st.text(alphabet="abcXYZ_%-", min_size=1, max_size=40),
    props=st.dictionaries(st.sampled_from(("a", "TAGS", "KEYS", "région")), st.text(min_size=1, max_size=20)),
)
def test_record_properties_slices_the_properties_of_any_record(
    born: bytes, stored: bytes, body: bytes, topic: str, props: dict[str, str]
) -> None:
    props = {k: v.replace("\x02", "") or "v" for k, v in props.items()}
    raw = encode_properties(props)
    record = encode_record(MessageRecord(topic, body, properties=raw, born_host=born, store_host=stored), 3, 99, 1)
    assert bytes(record_properties(memoryview(record))) == raw.encode()


def test_property_filter_skips_refused_candidates_and_counts_them_scanned(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for i in range(6):
        tags = "A" if i % 2 else "B"
        store.append(attrs.evolve(message(), properties=encode_properties({"TAGS": tags, "n": str(i)})))
    sql = compile_sql92("n >= 3")
    result = store.get("TopicTest", 0, 0, 32, property_filter=sql.matches_raw)
    assert (result.status, result.queue_offsets, result.next_begin_offset) == (GetStatus.FOUND, [3, 4, 5], 6)
    code_a = java_string_hash("A")
    both = store.get("TopicTest", 0, 0, 32, tag_filter=lambda code: code == code_a, property_filter=sql.matches_raw)
    assert both.queue_offsets == [3, 5]
    none = store.get("TopicTest", 0, 0, 32, property_filter=compile_sql92("n > 100").matches_raw)
    assert (none.status, none.messages, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, [], 6)
    store.close()
