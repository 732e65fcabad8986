"""Properties text read as ``java.util.Properties.load`` reads it, and written so that it reads back the same.

Found by a review (the parser trimmed values, knew no escapes, no blank separator and no odd/even backslash rule);
these failed before. The expected maps come from ``java.util.Properties.load`` (OpenJDK 17) on the same text.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.broker_conf_file import rewrite_properties
from remoting.codec.java_properties import (
    PropertiesError,
    decode_properties_file,
    escape_key,
    escape_value,
    format_properties,
    parse_properties,
)

# (properties text, what java.util.Properties.load gives)
JAVA_CASES = {
    "whitespace_separator": ("brokerName broker-a\n", {"brokerName": "broker-a"}),
    "tab_separator": ("brokerName\tbroker-a\n", {"brokerName": "broker-a"}),
    "blanks_then_one_separator": ("a \t= =b\n", {"a": "=b"}),
    "unicode_escape": ("brokerClusterName=My\\u0043luster\n", {"brokerClusterName": "MyCluster"}),
    "surrogate_pair": ("k=\\uD83D\\uDE00\n", {"k": "\U0001f600"}),
    "escaped_backslashes": ("storePathRootDir=C:\\\\data\\\\store\n", {"storePathRootDir": "C:\\data\\store"}),
    "escaped_equals_in_key": ("a\\=b=c\n", {"a=b": "c"}),
    "escaped_blank_in_key": ("a\\ b c\n", {"a b": "c"}),
    "tab_escape": ("brokerName=a\\tb\n", {"brokerName": "a\tb"}),
    "other_escapes_are_the_char": ("k=\\a\\#\\:\n", {"k": "a#:"}),
    "trailing_blanks_kept": ("k=v  \n", {"k": "v  "}),
    "bare_key": ("flag\n", {"flag": ""}),
    "comments_need_first_non_blank": ("  # c\n\t! c\nk=#v\n", {"k": "#v"}),
    "comment_line_is_never_continued": ("# c \\\nk=v\n", {"k": "v"}),
    "continuation_drops_leading_blanks": ("k=a;\\\n   b\n", {"k": "a;b"}),
    "continued_line_may_start_with_hash": ("k=a\\\n#b\n", {"k": "a#b"}),
    "blank_line_ends_a_continuation": ("k=a\\\n\nn=1\n", {"k": "a", "n": "1"}),
    # An escaped backslash at the end of a line is not a continuation: the next line is its own key.
    "even_backslashes_end_no_continuation": ("key=value\\\\\nnext=1\n", {"key": "value\\", "next": "1"}),
    # A continuation backslash on the very last line: the key keeps its value.
    "dangling_backslash_at_eof": ("messageDelayLevel=1s 5s \\", {"messageDelayLevel": "1s 5s "}),
    "cr_and_crlf_line_ends": ("a=1\rb=2\r\nc=3", {"a": "1", "b": "2", "c": "3"}),
    "later_key_wins": ("a=1\na=2\n", {"a": "2"}),
}


@pytest.mark.parametrize("case", sorted(JAVA_CASES))
def test_parse_properties_reads_what_java_util_properties_reads(case: str) -> None:
    text, java = JAVA_CASES[case]
    assert parse_properties(text) == java


@pytest.mark.parametrize("text", ["k=\\u00G1\n", "k=\\u12\n", "k=\\u"])
def test_a_malformed_unicode_escape_is_an_error(text: str) -> None:
    """Java's loadConvert throws IllegalArgumentException("Malformed \\uxxxx encoding.")."""
    with pytest.raises(PropertiesError, match="Malformed"):
        parse_properties(text)


def test_a_file_is_read_as_iso_8859_1() -> None:
    """Properties.load(InputStream): every byte is one character, so a Latin-1 comment or value never fails."""
    assert parse_properties(decode_properties_file(b"# caf\xe9\nname=caf\xe9\n")) == {"name": "caf\xe9"}


def test_the_writer_escapes_what_the_reader_would_misread() -> None:
    assert escape_key("a b=c:d#!") == "a\\ b\\=c\\:d\\#\\!"
    assert escape_value("  C:\\x\t\u4e2d") == "\\  C:\\\\x\\t\\u4E2D"
    assert format_properties({"k": "\U0001f600"}) == "k=\\uD83D\\uDE00\n"


_ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(st.dictionaries(_ANY, _ANY, max_size=6))
def test_what_the_writer_writes_reads_back_the_same(texts: dict[str, str]) -> None:
    written = format_properties(texts)
    assert written.isascii()
    assert parse_properties(written) == texts


@given(st.dictionaries(st.from_regex(r"[a-zA-Z][a-zA-Z0-9.]{0,8}", fullmatch=True), _ANY, max_size=5))
def test_a_rewritten_conf_file_reads_back_any_new_value(changes: dict[str, str]) -> None:
    text = "# c\\\nbrokerName = b \\\n  c\nflag\n"
    assert parse_properties(rewrite_properties(text, changes)) == {**parse_properties(text), **changes}
