"""How the message page shows a body (:func:`dashboard.messages.body_view`): text when it is UTF-8 without control
characters, else hex, with both views always offered."""

from __future__ import annotations

from dashboard.messages import MAX_BODY_SHOWN, body_view


def test_a_text_body_with_a_byte_order_mark_or_a_format_character_is_shown_as_text() -> None:
    """A UTF-8 body is text (rocketmq-dashboard shows ``new String(body, UTF-8)``) even with Unicode format
    characters, which ``str.isprintable`` refuses: a BOM-prefixed JSON body, an emoji sequence with zero-width
    joiners, a soft hyphen."""
    for text in ("\ufeff" + '{"order": 17}', "family: \U0001f468\u200d\U0001f469\u200d\U0001f467", "co\u00adop\n"):
        assert body_view(text.encode()) == {
            "encoding": "text",
            "text": text,
            "hex": text.encode().hex(" "),
            "length": len(text.encode()),
        }


def test_a_long_text_body_cut_inside_a_character_is_still_text() -> None:
    """Only the first MAX_BODY_SHOWN bytes are shown; a cut inside a multi-byte UTF-8 character leaves that
    character out of the text view rather than making the body hex."""
    body = ("\u6d88\u606f" * (MAX_BODY_SHOWN // 3 + 10)).encode()  # CJK text, 3 bytes a character
    assert MAX_BODY_SHOWN % 3 != 0 and len(body) > MAX_BODY_SHOWN
    view = body_view(body)
    assert view["encoding"] == "text" and view["length"] == len(body)
    assert view["text"] == body[: MAX_BODY_SHOWN - MAX_BODY_SHOWN % 3].decode()


def test_a_binary_body_is_hex_first_and_still_has_a_text_view() -> None:
    """Control characters (but tab, CR, LF) or bytes that are not UTF-8 make a body hex first; its text view shows
    the bytes that are not UTF-8 as U+FFFD, and a whole body ending inside a character is not text."""
    assert body_view(b"a\tb\r\n")["encoding"] == "text"
    assert body_view(b"\x1b[0m")["encoding"] == "hex"
    assert body_view("\u0085".encode())["encoding"] == "hex"  # NEXT LINE, a C1 control
    binary = body_view(b"ok \xff\xfe")
    assert (binary["encoding"], binary["text"]) == ("hex", "ok \ufffd\ufffd")
    assert body_view("\u6d88".encode()[:2])["encoding"] == "hex"
