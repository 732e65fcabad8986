"""The dot-product Java ``String.hashCode`` (and its prefix-cached form for index keys) equals the definition's
one-code-unit-at-a-time loop, for any text: ASCII, BMP, astral characters and lone surrogates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.message_properties import java_hash, java_hash_joined, java_hashes_joined, java_string_hash
from store.index_file import topic_key_hash, topic_key_hashes


def _java_hash_loop(text: str) -> int:
    """The definition: ``h = 31*h + unit`` over UTF-16 code units, one at a time, as a signed 32-bit int."""
    raw = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.one_of(st.text(), st.text(alphabet=st.characters(max_codepoint=127), min_size=200, max_size=2000)))
def test_java_hash_dot_product_equals_the_code_unit_loop(text: str) -> None:
    assert java_hash(text) == _java_hash_loop(text)
    assert java_string_hash(text) == _java_hash_loop(text)


def test_java_hash_of_lone_surrogates_and_astral_characters() -> None:
    for text in ("\ud800", "a\udfffb", "\U0001f600" * 300, "é" * 1000):
        assert java_hash(text) == _java_hash_loop(text)


@given(st.text(max_size=20), st.one_of(st.text(), st.text(alphabet="0123456789ABCDEF", min_size=250, max_size=600)))
def test_java_hash_joined_equals_the_hash_of_the_concatenation(prefix: str, text: str) -> None:
    assert java_hash_joined(prefix, text) == _java_hash_loop(prefix + text)


uniq_keys = st.builds(lambda head, n: f"{head}{n:04X}", st.sampled_from(["7F0000010A4B18B4AAC2705B6E6E", "C0A8"]),
                      st.integers(0, 0xFFFF))  # fmt: skip
index_keys = st.one_of(uniq_keys, st.text(max_size=8), st.text(alphabet="ab", max_size=6))


@given(st.text(max_size=20), st.lists(index_keys, max_size=40))
def test_batch_hashes_equal_one_hash_per_key(topic: str, keys: list[str]) -> None:
    assert java_hashes_joined(topic, keys) == [_java_hash_loop(topic + k) for k in keys]
    assert topic_key_hashes(topic, keys) == [topic_key_hash(topic, k) for k in keys]
