"""No renderer leaves a field empty: a value that is missing (a loader setting left at its
default, a fact not known) reads "n/a", "default" or is left out, never a label followed by
nothing, and never "None"."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest

from stepdoctor.model import EnvFact, LoaderInfo, ModelInfo, RunEnd, RunRecord, SystemSample
from stepdoctor.render import render_text
from stepdoctor.render.html import render_html
from stepdoctor.report import build_report
from tests.builders import record, steps

#: Lines of the text report that end with a colon by design: headings of what follows.
HEADINGS = {
    "Findings, most important first:",
    "Findings about the part of the job that ran, most important first:",
}


def _sparse(end: RunEnd | None) -> RunRecord:
    """A run whose every optional field is missing: no batch sizes, a loader left at its
    defaults, a model seen without dtypes or devices, facts without values or sources, system
    samples with nothing read, no host name or command."""
    s = steps(60, phases_ms={"data_wait": 12, "forward": 10}, batch=None)
    rec = record(
        s,
        system=tuple(SystemSample(t_ns=st.end_ns) for st in s),
        facts=(EnvFact(key="torch.num_threads", value=None), EnvFact(key="cpu.brand", value="")),
        loaders=(LoaderInfo(loader_id=1, num_workers=0),),
        models=(ModelInfo(model_id=1, class_name="Net", param_count=0, param_bytes=0),),
        batch_dtypes=("torch.float64",),  # float64 speaks, with an unknown default dtype
    )
    meta = dataclasses.replace(rec.meta, hostname="", command=(), cwd="")
    return dataclasses.replace(rec, meta=meta, end=end)


ENDS = [RunEnd(t_ns=0, status="ok"), RunEnd(t_ns=0, status="exception", exit_code=1), None]


@pytest.mark.parametrize("end", ENDS, ids=["ok", "exception", "killed"])
def test_text_report_has_no_label_without_a_value(end: RunEnd | None) -> None:
    report = build_report(_sparse(end))
    assert {f.rule for f in report.findings} >= {"input-bound", "float64"}
    text = render_text(report, width=1000)  # no line wrapped: a line ends where its field does
    for raw in text.splitlines():
        line = raw.strip(" │╭╮╰╯─")
        assert not re.search(r"\bNone\b", line), raw
        if line.endswith(":"):
            assert line in HEADINGS, raw
        assert not re.search(r":\s+\(", line), raw  # "threshold" after an empty value
    evidence = [line for line in text.splitlines() if "•" in line]
    assert any("DataLoader prefetch_factor: n/a" in line for line in evidence)
    assert any("torch default dtype: n/a" in line for line in evidence)


class _Cells(HTMLParser):
    """The text of every element of the kinds that hold one value or one labelled value."""

    KINDS = ("td", "b", "li", "p", "h1", "h2", "h3", "span", "pre")

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, list[str]]] = []
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.KINDS:
            self.open.append((tag, []))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.KINDS and self.open and self.open[-1][0] == tag:
            kind, parts = self.open.pop()
            text = "".join(parts)
            self.found.append((kind, " ".join(text.split())))
            if self.open:
                self.open[-1][1].append(text)

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1][1].append(data)


@pytest.mark.parametrize("end", ENDS, ids=["ok", "exception", "killed"])
def test_html_report_has_no_empty_field(end: RunEnd | None) -> None:
    rec = _sparse(end)
    page = render_html(rec, build_report(rec))
    body = page.split("<body>", 1)[1].split('<script type="application/json"', 1)[0]
    cells = _Cells()
    cells.feed(body)
    assert cells.found
    for kind, text in cells.found:
        if kind in ("p",) and not text:
            continue  # the plots' notes, filled in by the page's script
        assert text, f"empty <{kind}>"
        assert not re.search(r"\bNone\b", text), (kind, text)
        if kind != "b":  # <b>Fix:</b> labels the rest of its paragraph
            assert not text.endswith(":"), (kind, text)
        assert not re.search(r":\s*[;,)]|\bon\s*;", text), (kind, text)
    items = [text for kind, text in cells.found if kind == "li"]
    assert any(text.startswith("DataLoader prefetch_factor: n/a") for text in items)
    rows = [text for kind, text in cells.found if kind == "td"]
    assert "none (no worker processes)" in rows  # the loaders table's prefetch
