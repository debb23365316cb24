"""Marks for tests that need an optional package: they skip, saying which, where it is not
installed (``make test-pythons`` runs the tests without torch and the frameworks; ``make
test`` has them all)."""

from __future__ import annotations

import importlib.util

import pytest

__all__ = ["needs_module", "needs_torch"]


def needs_module(name: str, why: str = "") -> pytest.MarkDecorator:
    """Skip where ``name`` cannot be imported; ``why`` says what needs it."""
    return pytest.mark.skipif(
        importlib.util.find_spec(name) is None,
        reason=f"{name} is not installed" + (f" ({why})" if why else ""),
    )


#: The test runs a job that trains a torch model.
needs_torch = needs_module("torch", "the job trains a model")
