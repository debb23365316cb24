"""A run's output formats in one table: ``RENDERERS[name].render(RenderInput) -> str``.

Every format is rendered through the same signature, so a command picks one by name (its
``--format`` choices are the table's keys, in its order) and never branches on it. The CLI
builds what a renderer is handed: the diagnosis, only when ``needs_report`` says so. A format
other than text and JSON loads its module when it renders (the HTML page's jinja2 took ~45 ms
of the end of every ``stepdoctor run``, which prints text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stepdoctor.model import Report, RunRecord, TraceSummary
from stepdoctor.render.json import render_json
from stepdoctor.render.text import render_text

__all__ = ["RENDERERS", "RenderInput", "Renderer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderInput:
    """What a renderer formats.

    Attributes:
        record: the run.
        report: its diagnosis (with the profiler trace's findings folded in); None only for a
            format that does not need one (``Renderer.needs_report`` is False).
        trace: the analysis of the run's profiler trace, when it has one.
        width: width of terminal text, in characters.
    """

    record: RunRecord
    report: Report | None = None
    trace: TraceSummary | None = None
    width: int = 100

    def diagnosis(self) -> Report:
        """Return the report; raise ``ValueError`` when the caller built none."""
        if self.report is None:
            raise ValueError("this format renders the diagnosis: pass RenderInput(report=...)")
        return self.report


@dataclass(frozen=True, slots=True, kw_only=True)
class Renderer:
    """One output format.

    Attributes:
        name: the ``--format`` value.
        render: returns the whole output as text.
        needs_report: whether ``render`` reads ``RenderInput.report`` (the CLI skips the
            diagnosis when it does not).
    """

    name: str
    render: Callable[[RenderInput], str]
    needs_report: bool = True


def _text(x: RenderInput) -> str:
    """The terminal report, after the profiler trace's tables when there is a trace (its notes
    are among the report's warnings)."""
    text = render_text(x.diagnosis(), width=x.width)
    if x.trace is None:
        return text
    from stepdoctor.render.trace import render_trace

    return render_trace(x.trace, width=x.width, notes=False) + text


def _json(x: RenderInput) -> str:
    return render_json(x.diagnosis())


def _html(x: RenderInput) -> str:
    from stepdoctor.render.html import render_html

    return render_html(x.record, x.diagnosis(), x.trace)


def _speedscope(x: RenderInput) -> str:
    """The sampled stacks alone: no diagnosis needed."""
    from stepdoctor.render.speedscope import render_speedscope

    return render_speedscope(x.record)


def _perfetto(x: RenderInput) -> str:
    """The run's timeline alone: no diagnosis needed."""
    from stepdoctor.render.perfetto import render_perfetto

    return render_perfetto(x.record)


#: Every output format of a run, in the order ``--format`` lists them.
RENDERERS: dict[str, Renderer] = {
    r.name: r
    for r in (
        Renderer(name="text", render=_text),
        Renderer(name="json", render=_json),
        Renderer(name="html", render=_html),
        Renderer(name="perfetto", render=_perfetto, needs_report=False),
        Renderer(name="speedscope", render=_speedscope, needs_report=False),
    )
}
