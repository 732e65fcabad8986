"""Typed codec errors. Every malformed input the codec sees raises a subclass of :class:`CodecError`, never
anything else, so the transport can close exactly the one connection that sent it. The encode side's
:class:`MessageEncodeError` (a message the store cannot write) is a plain ``ValueError``, not a decode error."""

from __future__ import annotations


class CodecError(ValueError):
    """Base of every error raised while decoding bytes from a peer."""


class FrameLengthError(CodecError):
    """The frame's length prefix is below 4 or above the frame limit (16 MiB by default)."""


class HeaderLengthError(CodecError):
    """The header length in the header word exceeds the bytes left in the frame."""


class HeaderDecodeError(CodecError):
    """The header bytes do not parse in the frame's serialize type (bad JSON, truncated binary, unknown type)."""


class MessageDecodeError(CodecError):
    """A message record (CommitLog/pull layout) or a batch body is truncated or inconsistent."""


class HeaderFieldError(CodecError):
    """A custom header (extFields) lacks a required field or a value has the wrong type.

    ``field`` names the offending key so a processor can put it in the response remark.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class MessageEncodeError(ValueError):
    """The message cannot be stored: topic or properties too long for their length fields, or a bad host."""


class PropertiesTooLongError(MessageEncodeError):
    """The properties string exceeds the int16 length field (32767 bytes)."""


class BodyTooLongError(MessageEncodeError):
    """A body exceeds the store's ``maxMessageSize`` (checked by :func:`prepare_batch`)."""


class MixedBatchError(MessageEncodeError):
    """A batch of records names more than one topic or queue (the store appends a batch to one queue)."""
