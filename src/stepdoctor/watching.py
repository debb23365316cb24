"""``stepdoctor.watch()``: watch a training loop with a few lines of code.

::

    with stepdoctor.watch() as doc:
        for x, y in doc.loader(train_loader):
            ...
            doc.step(batch_size=len(x))

On exit (normal, exception, Ctrl-C) the record is finalised and the diagnosis printed to
stderr. Inside a script run by ``stepdoctor run`` it joins that run's session instead.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from stepdoctor.collect import Session, current_session, end_status, raised_at

__all__ = ["Watch", "stderr_line", "watch"]

F = TypeVar("F", bound=Callable[..., Any])


def stderr_line(line: str) -> None:
    """Write one ``[stepdoctor]`` line to stderr."""
    print(f"[stepdoctor] {line}", file=sys.stderr, flush=True)


class Watch:
    """A context manager (and decorator) around one ``Session``; see ``watch()``."""

    def __init__(
        self,
        out_dir: Path | None,
        *,
        json_path: Path | None,
        report: bool,
        session_options: dict[str, Any],
    ) -> None:
        self._out_dir = out_dir
        self._json_path = json_path
        self._report = report
        self._options = session_options
        self._session: Session | None = None
        self._joined = False

    def __enter__(self) -> Session:
        running = current_session()
        if running is not None:
            self._joined = True
            self._session = running
            return running
        options = {"progress_sink": stderr_line, **self._options}
        self._session = Session(self._out_dir, **options).start()
        if self._session.out_dir is not None:
            stderr_line(f"recording to {self._session.out_dir}")
        return self._session

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        session, self._session = self._session, None
        if session is None or self._joined:
            self._joined = False
            return
        status, code, error = end_status(exc)
        record = session.stop(status, code, error, error_at=raised_at(exc))
        # The report's modules (the rules, rich) load only here, after the job: a watched
        # job's start does not wait for them.
        from stepdoctor.render import render_json, render_text
        from stepdoctor.report import build_report

        try:
            report = build_report(record)
            if self._report:
                sys.stderr.write(render_text(report))
            if self._json_path is not None:
                self._json_path.write_text(render_json(report), encoding="utf-8")
            if session.out_dir is not None:
                stderr_line(f"run record: {session.record_path}")
        except Exception as exc2:  # reporting must never mask the job's own outcome
            stderr_line(f"could not build the report: {exc2!r}")

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def watch(
    out_dir: Path | str | None = None,
    *,
    json_path: Path | str | None = None,
    report: bool = True,
    **session_options: Any,
) -> Watch:
    """Watch the code inside ``with`` (or a decorated function).

    Args:
        out_dir: where the run record goes (default: a new folder under ./stepdoctor-runs/).
        json_path: also write the report as JSON there.
        report: print the diagnosis to stderr at the end.
        **session_options: passed to ``Session`` (``log_every_steps``, ``interval_s``,
            ``readers``, ``instrument_torch``, ``record``...).
    """
    return Watch(
        None if out_dir is None else Path(out_dir),
        json_path=None if json_path is None else Path(json_path),
        report=report,
        session_options=session_options,
    )
