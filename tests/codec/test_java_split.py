"""``java_split``, Java's ``String.split`` of a literal separator, which mqadmin's list options and the proxy's
authorization header both use: trailing empty strings dropped, leading and inner ones kept."""

from __future__ import annotations

import pytest

from remoting.codec.message_properties import java_split


@pytest.mark.parametrize(
    ("text", "sep", "parts"),
    [
        ("a,b", ",", ["a", "b"]),
        ("a,b,", ",", ["a", "b"]),
        (",", ",", []),
        (",,,", ",", []),
        ("", ",", [""]),
        ("a", ",", ["a"]),
        (",a", ",", ["", "a"]),
        ("a,,b", ",", ["a", "", "b"]),
        ("ak/2026//", "/", ["ak", "2026"]),
    ],
)
def test_java_split_drops_only_trailing_empty_strings_as_java(text: str, sep: str, parts: list[str]) -> None:
    assert java_split(text, sep) == parts
