"""The one thing pyproject.toml cannot say: the C parts (the hot path's hooks, the step
reducer, the trace scanner), built when a compiler is there (``optional``: without one the package installs and
runs their pure-Python twins; see traindoctor/native.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "traindoctor.collect._hotpath",
            ["src/traindoctor/collect/_hotpath.c"],
            optional=True,
        ),
        Extension(
            "traindoctor.collect._reduce",
            ["src/traindoctor/collect/_reduce.c"],
            optional=True,
        ),
        Extension(
            "traindoctor.traces._scan",
            ["src/traindoctor/traces/_scan.c"],
            optional=True,
        ),
    ]
)
