"""A run's report as one self-contained HTML page (no network needed to view it).

The verdict comes first (the findings, most valuable first, with the estimated and measured
speed-up, the evidence and the fix), then the plots (Chart.js 4, inlined: see
docs/reports.md for why that library), then the facts. ``html_context`` is everything handed
to the page, as plain values (the tests read it); ``render_html`` formats it.

The page is a Jinja template (``assets/report.html.jinja``) with autoescaping on, so every
string that comes from the run (commands, paths, op and model names, messages) is escaped by
the engine wherever it lands in markup; only our own CSS and JS (``assets/``) go in as they
are. The plot data travels as JSON inside a ``<script type="application/json">`` through
Jinja's ``tojson``, which writes ``<``, ``>``, ``&`` and ``'`` as ``\\u`` escapes, so no string
can close the script element; the charts draw text on a canvas, never as markup.
"""

from __future__ import annotations

import functools
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from stepdoctor.model import (
    SETUP_PHASE,
    JobReport,
    Report,
    RunRecord,
    Severity,
    TraceSummary,
    to_jsonable,
)
from stepdoctor.model.jvm import JvmGcLog
from stepdoctor.render.names import (
    PHASE_LABELS,
    RANK_COLUMNS,
    SEVERITY_LABELS,
    allocation_words,
    phase_label,
    rank_cells,
    short_path,
    site_words,
    speedup_words,
)
from stepdoctor.timeline import MAX_POINTS, Timelines, timelines

__all__ = ["html_context", "render_html", "render_job_html"]


def html_context(
    record: RunRecord, report: Report, *, max_points: int = MAX_POINTS
) -> dict[str, Any]:
    """What the page shows, as JSON values."""
    s = report.summary
    lines = timelines(record, s.warmup_steps, max_points=max_points)

    def seconds(t_ns: int) -> float:
        return round((t_ns - lines.origin_ns) / 1e9, 3)

    marks = [
        {
            "kind": "finding",
            "rule": f.rule,
            "label": f"{i}. {f.rule}",
            "start": seconds(f.span_ns[0]),
            "end": seconds(f.span_ns[1]),
        }
        for i, f in enumerate(report.findings, 1)
        if f.span_ns is not None
    ] + [
        {
            "kind": "profiler",
            "rule": "",
            "label": span.label,
            "start": seconds(span.start_ns),
            "end": seconds(span.end_ns),
        }
        for span in record.profiled
    ]
    return {
        "title": " ".join(record.meta.command) or record.meta.run_id,
        "run_id": record.meta.run_id,
        "hostname": record.meta.hostname,
        "started_unix_s": record.meta.started_unix_s,
        "end_status": report.end_status,
        "failed": report.failed,
        "outcome": report.outcome,
        "evidence_note": report.evidence_note,
        "summary": to_jsonable(s),
        "findings": [_finding(f, record.meta.cwd) for f in report.findings],
        "plots": {
            **_plots(lines),
            "marks": marks,
            "flame": _flame(report),
            "jvm": [_jvm(log, max_points) for log in record.jvm_gc],
        },
        "facts": [
            {"key": f.key, "value": f.value, "source": f.source}
            for f in {f.key: f for f in record.env}.values()  # probed twice: the last stands
        ],
        "models": [to_jsonable(m) for m in record.models],
        "loaders": [to_jsonable(x) for x in record.loaders],
        "experiments": [
            {
                "bound": x.bound,
                "unit": x.unit,
                "data_only": round(x.data_rate, 2),
                "compute_only": round(x.compute_rate, 2),
                "achieved": None if x.achieved_per_sec is None else round(x.achieved_per_sec, 2),
            }
            for x in report.experiments
        ],
        "warnings": list(report.warnings),
        "measure_with": report.measure_with,
    }


def _finding(f: Any, cwd: str) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity.value,
        "title": f.title,
        "explanation": f.explanation,
        "speedup": speedup_words(f.speedup, f.modelled),
        "evidence": [to_jsonable(e) for e in f.evidence],
        "fix": f.fix.summary,
        "snippet": f.fix.snippet,
        "where": [site_words(w, cwd) for w in f.where]
        + [allocation_words(a, cwd) for a in f.allocated_at],
    }


def _flame(report: Report) -> dict[str, Any] | None:
    """The sampled stacks as the flame graphs read them (``flame.js``)."""
    if not report.stack_counts:
        return None
    cwd = report.meta.cwd
    phases = list(dict.fromkeys(c.phase for c in report.stack_counts))
    biggest = Counter[str]()
    for c in report.stack_counts:
        biggest[c.phase] += c.samples
    timed = [p for p in biggest if p != SETUP_PHASE]
    return {
        "frames": {
            f.id: [f.function, short_path(f.file, cwd), f.line, f.user] for f in report.frames
        },
        "stacks": [[s.id, list(s.frames)] for s in report.stacks],
        "counts": [[c.phase, c.stack, c.samples] for c in report.stack_counts],
        "labels": {p: phase_label(p) for p in phases},
        "order": [*PHASE_LABELS, *phases],
        "first": max(timed, key=biggest.__getitem__) if timed else phases[0],
    }


def _plots(lines: Timelines) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if lines.steps is not None:
        st = lines.steps
        out["steps"] = {
            "bucket": st.bucket,
            "x": st.first_step,
            "phases": [
                {"name": "GC pauses" if p == "gc" else phase_label(p), "values": v}
                for p, v in st.phase_ms.items()
            ],
            "max": st.max_ms,
            "min": st.min_ms,
            "outliers": [{"x": i, "y": ms} for i, ms in st.outliers],
            "warmup": st.warmup_steps,
            "t": st.t_s,
            "throughput": st.samples_per_sec,
        }
    if lines.system is not None:
        out["system"] = {"bucket": lines.system.bucket, "t": lines.system.t_s,
                         "cores": lines.system.cores, **lines.system.series,
                         "io_t": lines.system.io_t_s, "io": lines.system.io}  # fmt: skip
    out["gpus"] = [
        {"index": i, "bucket": g.bucket, "t": g.t_s, **g.series} for i, g in lines.gpu.items()
    ]
    return out


def _jvm(log: JvmGcLog, max_points: int) -> dict[str, Any]:
    """A GC log's pauses for its plots: each pause kept (every ``stride``-th past a limit,
    thinned again to ``max_points``), with its kind and the heap before and after it."""
    kept = log.timeline
    step = max(1, -(-len(kept) // max_points))
    shown = kept[::step]

    def mib(value: int | None) -> float | None:
        return None if value is None else round(value / 2**20, 1)

    return {
        "name": Path(log.source).name or log.source,
        "collector": log.collector,
        "stride": log.pause_stride * step,
        "t": [round(p.t_s, 3) for p in shown],
        "pause_ms": [round(p.pause_s * 1000, 3) for p in shown],
        "kind": [p.kind for p in shown],
        "heap_before": [mib(p.heap_before_bytes) for p in shown],
        "heap_after": [mib(p.heap_after_bytes) for p in shown],
        "heap_total": [mib(p.heap_total_bytes) for p in shown],
    }


def _card(f: dict[str, Any]) -> dict[str, Any]:
    """A finding as the page shows it: its severity's label, the speed-up in words and every
    evidence value shown (``n/a`` for a setting left at its default or a fact not known)."""
    label = SEVERITY_LABELS.get(Severity(f["severity"]), f["severity"])
    evidence = [_evidence(e) for e in f["evidence"]]
    return {**f, "label": label, "evidence": evidence}


def _evidence(e: dict[str, Any]) -> dict[str, Any]:
    """One evidence item as the page shows it: shares as percentages, nothing left blank."""
    value, unit, threshold = e["value"], e["unit"], e["threshold"]
    if unit == "share" and isinstance(value, (int, float)):
        value, unit = f"{value:.1%}", ""
        threshold = None if threshold is None else f"{threshold:.0%}"
    return {**e, "value": _shown(value), "unit": unit, "threshold": threshold}


#: What the page shows for a missing value (None, an empty string): never an empty field.
MISSING = "n/a"


def _shown(value: object) -> object:
    """``value``, or ``MISSING`` when there is nothing to show."""
    return MISSING if value is None or value == "" else value


def _summary_items(s: dict[str, Any]) -> list[tuple[str, str]]:
    shares = sorted(s.get("phase_share", {}).items(), key=lambda kv: -kv[1])
    share_text = ", ".join(f"{phase_label(p)} {v:.0%}" for p, v in shares)
    rate = s.get("samples_per_sec")
    return [
        ("steps", f"{s['steps']:,} ({s['warmup_steps']} warm-up)"),
        ("wall time", f"{s['wall_s']:.1f} s"),
        ("samples/s", MISSING if rate is None else f"{rate:,.1f}"),
        ("mean step", MISSING if s.get("mean_step_ms") is None else f"{s['mean_step_ms']:.2f} ms"),
        ("where the time goes", share_text or MISSING),
    ]


def _table(title: str, headers: list[str], rows: list[list[object]]) -> list[dict[str, Any]]:
    """One table for the page, or none when it has no rows; no cell left empty."""
    shown = [[_shown(cell) for cell in row] for row in rows]
    return [{"title": title, "headers": headers, "rows": shown}] if rows else []


#: Kernels listed per rank in the profiler-trace section.
TOP_KERNELS = 10


def _trace_tables(trace: TraceSummary | None) -> list[dict[str, Any]]:
    """The profiler trace's breakdowns (``run --trace``), as tables."""
    if trace is None:
        return []
    rows: list[list[object]] = []
    for r in trace.ranks:
        t = r.temporal
        rows.append([
            r.rank,
            "-" if t is None else f"{t.kernel_time_us:,}",
            "-" if t is None else f"{t.idle_us:,} ({t.idle_pct:.2f}%)",
            "-" if t is None else f"{t.compute_us:,} ({t.compute_pct:.2f}%)",
            "-" if t is None else f"{t.non_compute_us:,} ({t.non_compute_pct:.2f}%)",
            "n/a" if r.comm_comp_overlap_pct is None else f"{r.comm_comp_overlap_pct:.2f}%",
        ])  # fmt: skip
    out = _table(
        "Profiler trace: GPU time per rank (µs)",
        ["rank", "kernel time", "idle", "compute", "non-compute", "comm/comp overlap"],
        rows,
    )
    out += _table(
        "Profiler trace: kernel types, all ranks (µs)",
        ["kernel types running", "µs", "share"],
        [[label, f"{us:,}", f"{pct:.1f}%"] for label, us, pct in trace.kernel_type_table()],
    )
    for r in trace.ranks:
        out += _table(
            f"Profiler trace: rank {r.rank}, top kernels",
            ["kernel", "type", "µs", "share"],
            [[k.name, k.kernel_type, f"{k.sum_us:,}", f"{k.share_pct:.2f}%"]
             for k in r.kernels[:TOP_KERNELS]],
        )  # fmt: skip
    return out


def _run_tables(ctx: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's facts, models, loaders and experiments, as tables."""
    return [
        *_table(
            "Environment", ["fact", "value", "source"],
            [[f["key"], f["value"], f["source"]] for f in ctx["facts"]],
        ),
        *_table(
            "Models", ["model", "parameters", "MiB", "dtypes", "devices", "layers", "input"],
            [[m["class_name"], f"{m['param_count']:,}", round(m["param_bytes"] / 2**20, 1),
              ", ".join(m["param_dtypes"]), ", ".join(m["devices"]), len(m["layers"]),
              "x".join(str(d) for d in m["input_shape"])] for m in ctx["models"]],
        ),
        *_table(
            "Data loaders", ["workers", "batch size", "pin memory", "prefetch", "persistent",
                             "dataset", "size"],
            [[x["num_workers"], x["batch_size"], x["pin_memory"], _prefetch(x),
              x["persistent_workers"], x["dataset_type"], x["dataset_len"]]
             for x in ctx["loaders"]],
        ),
        *_table(
            "Experiments", ["bound by", "data only", "compute only", "achieved", "unit"],
            [[x["bound"], x["data_only"], x["compute_only"], x["achieved"], x["unit"]]
             for x in ctx["experiments"]],
        ),
    ]  # fmt: skip


def _prefetch(loader: dict[str, Any]) -> object:
    """A loader's prefetch_factor as the table shows it: torch leaves it None without worker
    processes (nothing is prefetched) and sets 2 by default with them."""
    value = loader["prefetch_factor"]
    if value is not None:
        return value
    return "none (no worker processes)" if not loader["num_workers"] else "default"


def _inline(name: str) -> Markup:
    """One of our own files in ``render/assets`` (CSS, JS), to put in the page as it is."""
    return Markup(_asset_text(name))  # our code, never data from the run: not escaped


@functools.cache
def _asset_text(name: str) -> str:
    return (resources.files("stepdoctor.render") / "assets" / name).read_text(encoding="utf-8")


def _missing_none(value: object) -> object:
    """Show a missing value (None) as ``MISSING`` rather than "None" or nothing."""
    return MISSING if value is None else value


#: The page's template in ``render/assets`` (with ``report.css``, ``report.js`` and Chart.js).
PAGE_TEMPLATE = "report.html.jinja"


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("stepdoctor.render", "assets"),
        autoescape=True,
        finalize=_missing_none,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    # Compact JSON, and NaN refused as in every other JSON we write (JSON.parse rejects it).
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":"), "allow_nan": False}
    env.globals["inline"] = _inline
    return env.get_template(PAGE_TEMPLATE)


def render_job_html(job: JobReport, record: RunRecord, *, max_points: int = MAX_POINTS) -> str:
    """Return a distributed job's page: the job first (its verdict, the ranks' table, the
    ranks' own findings labelled by rank), then the page of ``record`` (the lowest rank read,
    whose report is ``job.ranks[0]``) in detail."""
    report = next((r for r in job.ranks if r.meta.run_id == record.meta.run_id), job.ranks[0])
    cwd = record.meta.cwd
    size = f"world size {job.world_size}" if job.world_size else "world size not recorded"
    context = {
        "ranks_read": len(job.ranks),
        "size": size,
        "folder": job.folder,
        "detail_rank": report.meta.rank,
        "findings": [_card(_finding(f, cwd)) for f in job.findings],
        "rank_findings": [_card(_finding(f.labelled(), cwd)) for f in job.rank_findings],
        "headers": list(RANK_COLUMNS),
        "rows": [[rank_cells(row, MISSING)[c] for c in RANK_COLUMNS] for row in job.rows],
        "problems": list(job.problems),
    }
    return render_html(record, report, max_points=max_points, job=context)


def render_html(
    record: RunRecord,
    report: Report,
    trace: TraceSummary | None = None,
    *,
    max_points: int = MAX_POINTS,
    job: dict[str, Any] | None = None,
) -> str:
    """Return the page (with the profiler trace's tables when ``trace`` is given; after a
    distributed job's section when ``job`` is given: ``render_job_html``)."""
    ctx = html_context(record, report, max_points=max_points)
    return _template().render(
        job=job,
        title=ctx["title"],
        run_id=ctx["run_id"],
        hostname=ctx["hostname"],
        status=ctx["end_status"]
        or (
            "not known: read from its logs"
            if record.from_logs
            else "no end recorded (killed, or still running)"
        ),
        failed=ctx["failed"],
        outcome=ctx["outcome"],
        evidence_note=ctx["evidence_note"],
        steps=ctx["summary"]["steps"],
        summary=_summary_items(ctx["summary"]),
        findings=[_card(f) for f in ctx["findings"]],
        warnings=ctx["warnings"],
        measure_with=ctx["measure_with"],
        gpus=[int(g["index"]) for g in ctx["plots"].get("gpus", [])],
        jvm=[g["name"] for g in ctx["plots"]["jvm"]],
        tables=_run_tables(ctx) + _trace_tables(trace),
        plots=ctx["plots"],
    )
