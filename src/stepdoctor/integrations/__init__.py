"""Training frameworks watched in their own terms: Lightning, the Hugging Face Trainer, Keras,
and hand-written TensorFlow loops.

Each integration is a module of its own that imports its framework (``pip install
stepdoctor[lightning]``, ``[transformers]``, ``[keras]``); this package imports none of them.
Under ``stepdoctor run`` (``AutoIntegrations``) each is installed when the job imports its
framework, through a post-import hook (``collect.hooks.on_import``): the job's script is left
as it is.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

from stepdoctor.collect.hooks.on_import import when_imported
from stepdoctor.collect.hooks.session import BaseSession

__all__ = ["FRAMEWORK_MODULES", "AutoIntegrations"]

logger = logging.getLogger(__name__)

#: The module whose import installs an integration, and the integration's ``install``
#: arguments after the session: Lightning under both its package names, the Hugging Face
#: Trainer's own module (``transformers`` itself loads its parts lazily), Keras, TensorFlow
#: (its hand-written loops).
FRAMEWORK_MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "lightning.pytorch": ("stepdoctor.integrations.lightning", ("lightning",)),
    "pytorch_lightning": ("stepdoctor.integrations.lightning", ("pytorch_lightning",)),
    "transformers.trainer": ("stepdoctor.integrations.transformers", ()),
    "keras": ("stepdoctor.integrations.keras", ()),
    "tensorflow": ("stepdoctor.integrations.tensorflow", ()),
}


class AutoIntegrations:
    """Install each framework's integration into ``session`` when the job imports the
    framework; ``uninstall`` undoes them (a hook left waiting for an import stays, inert)."""

    def __init__(
        self,
        session: BaseSession,
        modules: dict[str, tuple[str, tuple[str, ...]]] | None = None,
    ) -> None:
        """``modules``: which module's import installs which integration (by default
        ``FRAMEWORK_MODULES``)."""
        self._session = session
        self._modules = FRAMEWORK_MODULES if modules is None else modules
        self._undo: list[Callable[[], None]] = []
        self._active = False
        self.installed: list[str] = []

    def install(self) -> None:
        """Watch for the frameworks' imports (one already imported is installed now)."""
        self._active = True
        for module_name in self._modules:
            when_imported(module_name, self._on_import)

    def uninstall(self) -> None:
        """Undo every integration installed."""
        self._active = False
        while self._undo:
            try:
                self._undo.pop()()
            except Exception as exc:  # an undo failing must not break the job's end
                logger.warning("stepdoctor: could not undo an integration: %r", exc)

    def _on_import(self, module: object) -> None:
        name = getattr(module, "__name__", "")
        if not self._active or name not in self._modules or name in self.installed:
            return
        home, args = self._modules[name]
        try:
            integration = importlib.import_module(home)
            self._undo.append(integration.install(self._session, *args))
            self.installed.append(name)
        except Exception as exc:  # the job runs on, watched through torch's hooks alone
            self._session.notice(f"the {name} integration could not be installed: {exc!r}")
