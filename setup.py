"""The optional C extension (remoting.codec._speedups); everything else is in pyproject.toml.

``optional=True``: without a compiler ``pip install -e .`` still succeeds and the codec runs its pure-Python path
(:mod:`remoting.codec.record_batch`).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "remoting.codec._speedups",
            ["remoting/codec/_speedups.c"],
            depends=["remoting/codec/record_encoder.h"],
            libraries=["z"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
