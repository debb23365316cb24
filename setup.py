"""The one thing pyproject.toml cannot say: the hot path's C hooks, built when a compiler is
there (``optional``: without one the package installs and runs the pure-Python hooks)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "traindoctor.collect._hotpath",
            ["src/traindoctor/collect/_hotpath.c"],
            optional=True,
        )
    ]
)
