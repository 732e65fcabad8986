"""The optional C extensions; everything else is in pyproject.toml.

- ``remoting.codec._speedups``: the record encoders of :mod:`remoting.codec.record_batch` and the replica's scan
  of :mod:`remoting.codec.record_scan` and the consumer's pull-body decoder of :mod:`remoting.codec.pull_body`.
- ``store._appender``: ``MessageStore.append``'s and ``append_batch``'s usual case (store/_appender.c) and the
  ``AppendResult`` type (store/_append_result.c).
- ``dledger._entries``: a DLedger member's per-entry work (dledger/_entries.c): the leader's push encoding, entry
  seal and answers' decode, a follower's push decode and its write of the pushed entries.

The first two include ``remoting/codec/record_encoder.h``. ``optional=True``: without a compiler ``pip install -e .``
still succeeds and the store and DLedger run their pure-Python paths.
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
HEADER = "remoting/codec/record_encoder.h"

setup(
    ext_modules=[
        Extension(
            "remoting.codec._speedups",
            ["remoting/codec/_speedups.c"],
            depends=[
                HEADER,
                "remoting/codec/record_scan.h",
                "remoting/codec/pull_decode.h",
                "remoting/codec/send_header.h",
                "remoting/codec/batch_split.h",
                "remoting/codec/send_frame.h",
            ],
            libraries=["z"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "store._appender",
            ["store/_appender.c", "store/_append_result.c"],
            depends=[HEADER, "store/_append_result.h"],
            include_dirs=["remoting/codec"],
            libraries=["z"],
            extra_compile_args=[*FLAGS, "-fvisibility=hidden"],  # only PyInit__appender is exported
            optional=True,
        ),
        Extension("dledger._entries", ["dledger/_entries.c"], libraries=["z"], extra_compile_args=FLAGS, optional=True),
    ]
)
