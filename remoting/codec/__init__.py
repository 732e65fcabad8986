"""Sans-IO RocketMQ remoting codec: frames, commands, header serializers, custom headers and message records.

Nothing in this package performs I/O or imports trio.
"""

from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from remoting.codec.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand, request
from remoting.codec.errors import CodecError
from remoting.codec.frame import MAX_FRAME, FrameDecoder, decode_payload, encode_command

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "MAX_FRAME",
    "CodecError",
    "FrameDecoder",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_payload",
    "encode_command",
    "request",
]
