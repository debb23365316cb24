"""Call a function once a module has been imported: how ``stepdoctor run`` instruments torch
and installs a framework's integration when the job imports it, leaving the script as it is.

wrapt's ``register_post_import_hook`` did this; importing wrapt (it loads asyncio and
importlib.metadata) added ~140 ms to the start of every watched job here, before its first line
(``benchmarks/startup.py``). This is the part stepdoctor used: a finder first on
``sys.meta_path`` that, for a watched name only, asks the finders after it for the module's spec
and wraps the spec's loader, so the hooks run in the importing thread once the module has run.
Any other import passes through untouched (a dict lookup).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["when_imported"]

logger = logging.getLogger(__name__)

Hook = Callable[[ModuleType], object]

_lock = threading.Lock()
_hooks: dict[str, list[Hook]] = {}


def when_imported(name: str, hook: Hook) -> None:
    """Call ``hook(module)`` once the module ``name`` (dotted for a submodule) is imported: now
    if it is already, else in the thread that imports it, right after the module has run. Each
    hook is called once; one that raises is logged and the import goes on."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append(hook)
            if not any(isinstance(f, _Finder) for f in sys.meta_path):
                sys.meta_path.insert(0, _Finder())
            return
    _call(hook, module)


def _call(hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception:  # the job's import goes on: a hook's failure is stepdoctor's own
        logger.warning("stepdoctor: a hook on importing %s failed", module.__name__, exc_info=True)


def _imported(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
    for hook in hooks:
        _call(hook, module)


class _Finder:
    """First on ``sys.meta_path``: finds nothing itself; for a watched module it returns the
    spec the next finders give, with its loader wrapped."""

    def __init__(self) -> None:
        self._asking = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in _hooks:
            return None
        asking: set[str] = self._asking.__dict__.setdefault("names", set())
        if fullname in asking:  # a finder after this one asked the import system again
            return None
        asking.add(fullname)
        try:
            spec = self._next_spec(fullname, path, target)
        finally:
            asking.discard(fullname)
        if spec is None:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            # a namespace package, or a loader of the old protocol: found as it would be,
            # its hooks left waiting
            logger.debug("stepdoctor: %s imports without a loader to hook", fullname)
            return spec
        spec.loader = _Loader(spec.loader, fullname)  # type: ignore[assignment]
        return spec

    def _next_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, _Finder):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        """Nothing cached here (``importlib.invalidate_caches`` calls every finder's)."""


class _Loader:
    """The module's own loader, which calls the hooks once the module has run. The module
    keeps the real loader as its ``__loader__`` and ``__spec__.loader``."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        _imported(self._name, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
