"""The name a sampled frame's function is shown by."""

from __future__ import annotations

from types import CodeType

__all__ = ["qualified_name"]


def qualified_name(code: CodeType) -> str:
    """``code``'s qualified name (``Class.method``, ``f.<locals>.g``) where the interpreter
    keeps one (``co_qualname``, CPython 3.11+); its bare name on 3.10."""
    return getattr(code, "co_qualname", code.co_name)
