"""Where in the code, as each format shows it: the finding's sites in text, JSON and HTML
(escaped), a speedscope profile per phase that validates against speedscope's schema, and
the samples on the Perfetto timeline."""

from __future__ import annotations

import json

import jsonschema

from stepdoctor.model import CodeSite
from stepdoctor.render.html import html_context, render_html
from stepdoctor.render.json import render_json
from stepdoctor.render.names import site_words
from stepdoctor.render.perfetto import STACKS_TID, record_to_trace
from stepdoctor.render.speedscope import record_to_speedscope
from stepdoctor.render.text import render_text
from stepdoctor.report import build_report
from tests.builders import record, stacked, steps
from tests.shared_data import SCHEMAS, needs

SCHEMA_FILE = SCHEMAS / "speedscope_schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text()) if SCHEMA_FILE.exists() else {}
HOSTILE = "<img src=x onerror=alert(1)>"
LOADER = ("DataLoader.__next__", "fetch")


def _rec():  # type: ignore[no-untyped-def]
    s = steps(60, phases_ms={"data_wait": 30, "forward": 5, "backward": 5})
    return stacked(
        record(s),
        {
            "data_wait": [(("<module>", "train", *LOADER, HOSTILE, "json.loads"), 45),
                          (("<module>", "train", *LOADER), 5)],
            "forward": [(("<module>", "train", "Net.forward"), 10)],
        },
        library=(*LOADER, "json.loads"),
    )  # fmt: skip


def test_the_site_reads_as_a_sentence() -> None:
    site = CodeSite(function="decode", file="/job/data.py", line=41, phase="data_wait",
                    share=0.62, total_share=0.9, self_share=0.5, samples=62,
                    calls="json.loads")  # fmt: skip
    assert site_words(site, "/job") == "62% of data wait (ETL): decode (data.py:41), in json.loads"


def test_text_and_json_show_where_the_data_wait_goes() -> None:
    report = build_report(_rec())
    text = render_text(report, width=200)
    assert f"% of data wait (ETL): {HOSTILE} (/job/train.py:10), in lib.json.loads" in text
    finding = next(
        f for f in json.loads(render_json(report))["findings"] if f["rule"] == "input-bound"
    )
    assert finding["where"][0]["function"] == HOSTILE and finding["where"][0]["share"] > 0.8


def test_html_escapes_the_names_and_carries_the_flame_data() -> None:
    rec = _rec()
    report = build_report(rec)
    page = render_html(rec, report)
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    flame = html_context(rec, report)["plots"]["flame"]
    assert flame["first"] == "data_wait"
    assert sum(c[2] for c in flame["counts"] if c[0] == "data_wait") == 50
    assert any(f[0] == HOSTILE for f in flame["frames"].values())


@needs(SCHEMA_FILE)
def test_speedscope_profile_is_valid_by_speedscopes_schema() -> None:
    jsonschema.validate(record_to_speedscope(_rec()), SCHEMA)


def test_speedscope_has_a_profile_per_phase() -> None:
    data = record_to_speedscope(_rec())
    names = [p["name"] for p in data["profiles"]]
    assert names == ["data wait (ETL) (50 samples)", "forward (10 samples)"]
    frames = data["shared"]["frames"]
    first = data["profiles"][0]["samples"][0]
    assert [frames[i]["name"] for i in first][-2:] == [HOSTILE, "json.loads"]
    assert record_to_speedscope(record(()))["profiles"] == []


def test_perfetto_puts_each_sample_on_the_stacks_track() -> None:
    events = record_to_trace(_rec())["traceEvents"]
    on_track = [e for e in events if e.get("tid") == STACKS_TID and e["ph"] == "i"]
    assert len(on_track) == 60
    assert on_track[0]["name"] == "json.loads" and on_track[0]["args"]["phase"] == "data wait (ETL)"
