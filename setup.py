"""The optional C extensions; everything else is in pyproject.toml.

- ``remoting.codec._speedups``: the record encoders of :mod:`remoting.codec.record_batch`.
- ``store._appender``: ``MessageStore.append``'s single-record path (store/_appender.c).

Both include ``remoting/codec/record_encoder.h``. ``optional=True``: without a compiler ``pip install -e .`` still
succeeds and the store runs its pure-Python path.
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
HEADER = "remoting/codec/record_encoder.h"

setup(
    ext_modules=[
        Extension(
            "remoting.codec._speedups",
            ["remoting/codec/_speedups.c"],
            depends=[HEADER],
            libraries=["z"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "store._appender",
            ["store/_appender.c"],
            depends=[HEADER],
            include_dirs=["remoting/codec"],
            libraries=["z"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
    ]
)
