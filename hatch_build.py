"""Hatchling build hook: compile stepdoctor's optional C parts into the wheel.

The C parts are the hot path's hooks (``collect/hooks/_hotpath.c``), the step reducer
(``collect/reduce/_reduce.c``), the /proc sampler thread (``collect/sampling/_sample.c``,
POSIX), the stack sampler's frame walk (``collect/sampling/_frames.c``, CPython 3.11-3.13) and
the trace scanner (``traces/_scan.c``) and the GC log parsers' fast path
(``logs/_gcscan.c``). Each has a pure-Python twin that is the
reference and the fallback (``stepdoctor/native.py``), so a part that does not compile (no C
compiler, no Python headers) is reported as a warning and left out: the package
still installs and works, as a pure-Python wheel if none was built.

Each part is compiled next to its source (setuptools' ``build_ext --inplace`` drives the
platform's compiler, as it would for a setuptools project): an editable install imports it from
``src/`` at once, and a wheel takes it in with ``force_include`` (the built files are ignored by
git, which hatchling's file selection follows). ``make test`` sets
``STEPDOCTOR_REQUIRE_C_PARTS=1`` so that CI fails when a part did not build.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: (module, source) of every C part.
EXTENSIONS = (
    ("stepdoctor.collect.hooks._hotpath", "src/stepdoctor/collect/hooks/_hotpath.c"),
    ("stepdoctor.collect.reduce._reduce", "src/stepdoctor/collect/reduce/_reduce.c"),
    ("stepdoctor.collect.sampling._sample", "src/stepdoctor/collect/sampling/_sample.c"),
    ("stepdoctor.collect.sampling._frames", "src/stepdoctor/collect/sampling/_frames.c"),
    ("stepdoctor.traces._scan", "src/stepdoctor/traces/_scan.c"),
    ("stepdoctor.logs._gcscan", "src/stepdoctor/logs/_gcscan.c"),
)


@contextlib.contextmanager
def _working_folder(path: str) -> Iterator[None]:
    """Run the block in ``path`` (``contextlib.chdir`` from Python 3.11 on)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


class CPartsBuildHook(BuildHookInterface):
    """Compile the C parts for the wheel and editable targets."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Build each part in place; add the ones built to the wheel and mark it platform's."""
        if self.target_name != "wheel":
            return
        built = [path for module, source in EXTENSIONS if (path := self._build(module, source))]
        if not built:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install finds them in src/ already
            for path in built:
                inside = path.relative_to(Path(self.root) / "src").as_posix()
                build_data["force_include"][str(path)] = inside

    def _build(self, module: str, source: str) -> Path | None:
        """Compile one part in place; None (and a warning) when it cannot be built."""
        # setuptools is a build requirement only for its compiler driver.
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext

        dist = Distribution(
            {"ext_modules": [Extension(module, [source])], "package_dir": {"": "src"}}
        )
        cmd = build_ext(dist)
        cmd.inplace = True
        # setuptools resolves the sources and the in-place target against the working folder
        with tempfile.TemporaryDirectory() as tmp, _working_folder(self.root):
            # everything built afresh in a new folder: never a stale part of an earlier build
            cmd.build_temp = cmd.build_lib = tmp
            cmd.force = True
            cmd.ensure_finalized()
            target = Path(self.root) / cmd.get_ext_fullpath(module)
            target.unlink(missing_ok=True)  # never ship what an earlier build left
            try:
                cmd.run()
            except Exception as exc:  # a compiler's failure has many types; all mean "not built"
                message = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
                self.app.display_warning(
                    f"stepdoctor: the C part {module} was not built ({message[0]}); "
                    "its pure-Python twin will be used"
                )
                return None
        print(f"stepdoctor: built {module}", file=sys.stderr)
        return target
