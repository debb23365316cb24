"""A run's report as one self-contained HTML page (no network needed to view it).

The verdict comes first (the findings, most valuable first, with the estimated and measured
speed-up, the evidence and the fix), then the plots (Chart.js 4, inlined: see
docs/reports.md for why that library), then the facts. ``html_context`` is everything handed
to the page, as plain values (the tests read it); ``render_html`` formats it.

Every string that comes from the run (commands, paths, op and model names, messages) is
escaped: ``html.escape`` where it lands in markup, and the plot data travels as JSON inside a
``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as ``\\u`` escapes, so
no string can close the script element; the charts draw text on a canvas, never as markup.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from stepdoctor.model import Report, RunRecord, Severity, TraceSummary, to_jsonable
from stepdoctor.render.names import SEVERITY_LABELS, phase_label
from stepdoctor.timeline import MAX_POINTS, Timelines, timelines

__all__ = ["html_context", "render_html"]


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
            "label": "torch.profiler (--trace)",
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
        "summary": to_jsonable(s),
        "findings": [_finding(f) for f in report.findings],
        "plots": {**_plots(lines), "marks": marks},
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
    }


def _finding(f: Any) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity.value,
        "title": f.title,
        "explanation": f.explanation,
        "estimated_speedup": f.speedup.factor,
        "speedup_method": f.speedup.method,
        "measured_speedup": None if f.measurement is None else f.measurement.factor,
        "evidence": [to_jsonable(e) for e in f.evidence],
        "fix": f.fix.summary,
        "snippet": f.fix.snippet,
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


def _esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _json_for_script(data: object) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _speedup(f: dict[str, Any]) -> str:
    est = f"up to {f['estimated_speedup']:.2f}x (estimated)" if f["estimated_speedup"] > 1 else ""
    if f["measured_speedup"] is not None:
        est += f"{'; ' if est else ''}{f['measured_speedup']:.2f}x measured"
    return est or "no speed-up"


def _findings_html(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return '<p class="ok">No findings: nothing slows this run down that the rules know.</p>'
    cards = []
    for i, f in enumerate(findings, 1):
        evidence = "".join(
            f"<li>{_esc(e['metric'])}: <b>{_esc(e['value'])}</b> {_esc(e['unit'])}"
            + (f" (threshold {_esc(e['threshold'])})" if e.get("threshold") is not None else "")
            + "</li>"
            for e in f["evidence"]
        )
        snippet = f"<pre>{_esc(f['snippet'])}</pre>" if f["snippet"] else ""
        label = SEVERITY_LABELS.get(Severity(f["severity"]), f["severity"])
        cards.append(
            f'<section class="finding {_esc(f["severity"])}" data-rule="{_esc(f["rule"])}">'
            f'<h3>{i}. <span class="sev">{_esc(label)}</span> {_esc(f["title"])} '
            f'<span class="rule">{_esc(f["rule"])}</span></h3>'
            f'<p class="speedup">{_esc(_speedup(f))}</p>'
            f"<p>{_esc(f['explanation'])}</p><ul>{evidence}</ul>"
            f'<p class="fix"><b>Fix:</b> {_esc(f["fix"])}</p>{snippet}</section>'
        )
    return "\n".join(cards)


def _table(title: str, headers: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        f"<h2>{_esc(title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _summary_html(ctx: dict[str, Any]) -> str:
    s = ctx["summary"]
    shares = sorted(s.get("phase_share", {}).items(), key=lambda kv: -kv[1])
    share_text = ", ".join(f"{phase_label(p)} {v:.0%}" for p, v in shares)
    rate = s.get("samples_per_sec")
    items = [
        ("steps", f"{s['steps']:,} ({s['warmup_steps']} warm-up)"),
        ("wall time", f"{s['wall_s']:.1f} s"),
        ("samples/s", "-" if rate is None else f"{rate:,.1f}"),
        ("mean step", "-" if s.get("mean_step_ms") is None else f"{s['mean_step_ms']:.2f} ms"),
        ("where the time goes", share_text or "-"),
    ]
    cells = "".join(f"<div><span>{_esc(k)}</span><b>{_esc(v)}</b></div>" for k, v in items)
    return f'<div class="summary">{cells}</div>'


#: Kernels listed per rank in the profiler-trace section.
TOP_KERNELS = 10


def _trace_html(trace: TraceSummary | None) -> str:
    """The profiler trace's breakdowns (``run --trace``), as tables."""
    if trace is None:
        return ""
    rows = []
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


def render_html(
    record: RunRecord,
    report: Report,
    trace: TraceSummary | None = None,
    *,
    max_points: int = MAX_POINTS,
) -> str:
    """Return the page (with the profiler trace's tables when ``trace`` is given)."""
    ctx = html_context(record, report, max_points=max_points)
    chart_js = (resources.files("stepdoctor.render") / "assets" / "chart.umd.min.js").read_text(
        encoding="utf-8"
    )
    facts = _table(
        "Environment", ["fact", "value", "source"],
        [[f["key"], f["value"], f["source"]] for f in ctx["facts"]],
    )  # fmt: skip
    models = _table(
        "Models", ["model", "parameters", "MiB", "dtypes", "devices", "layers", "input"],
        [[m["class_name"], f"{m['param_count']:,}", round(m["param_bytes"] / 2**20, 1),
          ", ".join(m["param_dtypes"]), ", ".join(m["devices"]), len(m["layers"]),
          "x".join(str(d) for d in m["input_shape"])] for m in ctx["models"]],
    )  # fmt: skip
    loaders = _table(
        "Data loaders", ["workers", "batch size", "pin memory", "prefetch", "persistent",
                         "dataset", "size"],
        [[x["num_workers"], x["batch_size"], x["pin_memory"], x["prefetch_factor"],
          x["persistent_workers"], x["dataset_type"], x["dataset_len"]] for x in ctx["loaders"]],
    )  # fmt: skip
    experiments = _table(
        "Experiments", ["bound by", "data only", "compute only", "achieved", "unit"],
        [[x["bound"], x["data_only"], x["compute_only"], x["achieved"], x["unit"]]
         for x in ctx["experiments"]],
    )  # fmt: skip
    warnings = "".join(f"<li>{_esc(w)}</li>" for w in ctx["warnings"])
    plots = ctx["plots"]
    gpu_canvases = "".join(
        f"<h3>GPU {int(g['index'])}</h3>"
        f'<div class="plot"><canvas id="gpu{int(g["index"])}-util"></canvas></div>'
        f'<div class="plot"><canvas id="gpu{int(g["index"])}-mem"></canvas></div>'
        for g in plots.get("gpus", [])
    )
    return _PAGE.format(
        title=_esc(ctx["title"]),
        run=_esc(ctx["run_id"]),
        host=_esc(ctx["hostname"]),
        status=_esc(ctx["end_status"] or "unknown"),
        summary=_summary_html(ctx),
        findings=_findings_html(ctx["findings"]),
        warnings=f"<h2>Notes</h2><ul>{warnings}</ul>" if warnings else "",
        gpus=gpu_canvases,
        tables=facts + models + loaders + experiments + _trace_html(trace),
        chart_js=chart_js,
        data=_json_for_script(plots),
        script=_SCRIPT,
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stepdoctor: {title}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;
color:#222}}
h1{{font-size:1.5em;margin-bottom:.2em}} .meta{{color:#666}}
.summary{{display:flex;flex-wrap:wrap;gap:.5em 2em;margin:1em 0}}
.summary div{{display:flex;flex-direction:column}} .summary span{{color:#666;font-size:.85em}}
.finding{{border-left:6px solid #999;padding:.2em 1em;margin:1em 0;background:#fafafa}}
.finding.critical{{border-color:#c62828}} .finding.warning{{border-color:#ef8f00}}
.finding.info{{border-color:#1565c0}} .finding h3{{margin:.4em 0}}
.rule{{color:#888;font-weight:normal;font-size:.8em}} .speedup{{font-weight:bold}}
.sev{{font-size:.8em;padding:0 .4em;border-radius:3px;background:#eee}}
pre{{background:#f0f0f0;padding:.5em;overflow:auto}} .ok{{color:#2e7d32}}
.plot{{position:relative;height:280px;margin-bottom:1.5em}}
table{{border-collapse:collapse;margin-bottom:1.5em;font-size:.9em}}
td,th{{border-bottom:1px solid #ddd;padding:.2em .8em;text-align:left;vertical-align:top}}
.note{{color:#666;font-size:.85em}}
</style>
<script>{chart_js}</script>
</head><body>
<h1>stepdoctor: {title}</h1>
<p class="meta">run {run} on {host}; ended: {status}</p>
{summary}
<h2>What to change</h2>
{findings}
{warnings}
<h2>Step time</h2>
<p class="note" id="steps-note"></p>
<div class="plot"><canvas id="steps"></canvas></div>
<h2>Throughput</h2>
<p class="note" id="throughput-note"></p>
<div class="plot"><canvas id="throughput"></canvas></div>
<h2>Machine</h2>
<p class="note" id="system-note"></p>
<div class="plot"><canvas id="cpu"></canvas></div>
<div class="plot"><canvas id="memory"></canvas></div>
<div class="plot"><canvas id="io"></canvas></div>
{gpus}
{tables}
<script type="application/json" id="td-data">{data}</script>
<script>{script}</script>
</body></html>
"""

_SCRIPT = r"""
"use strict";
const D = JSON.parse(document.getElementById("td-data").textContent);
D.marks = D.marks || [];
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"];
const shade = {
  id: "shade",
  beforeDatasetsDraw(chart, args, opts) {
    if (!opts || opts.until == null) return;
    const a = chart.chartArea, x = chart.scales.x.getPixelForValue(opts.until);
    if (!(x > a.left)) return;
    const c = chart.ctx;
    c.save(); c.fillStyle = "rgba(0,0,0,0.07)";
    c.fillRect(a.left, a.top, Math.min(x, a.right) - a.left, a.bottom - a.top);
    c.restore();
  },
};
const marks = {
  id: "marks",
  afterDatasetsDraw(chart, args, opts) {
    if (!opts || !opts.spans || !opts.spans.length) return;
    const a = chart.chartArea, x = chart.scales.x, c = chart.ctx;
    c.save();
    for (const m of opts.spans) {
      const x0 = Math.max(a.left, x.getPixelForValue(m.start));
      const x1 = Math.min(a.right, x.getPixelForValue(m.end));
      if (!(x1 > x0)) continue;
      const rgb = m.kind === "profiler" ? "21,101,192" : "198,40,40";
      c.fillStyle = "rgba(" + rgb + ",0.08)"; c.fillRect(x0, a.top, x1 - x0, a.bottom - a.top);
      c.strokeStyle = "rgba(" + rgb + ",0.6)"; c.strokeRect(x0, a.top, x1 - x0, a.bottom - a.top);
      c.fillStyle = "rgb(" + rgb + ")"; c.font = "11px sans-serif";
      c.fillText(m.label, x0 + 3, a.top + 12);
    }
    c.restore();
  },
};
Chart.register(shade, marks);
function pts(xs, ys) {
  return xs.map((x, i) => ({x: x, y: ys[i]}));
}
function chart(id, datasets, xTitle, yTitle, stacked, warmup) {
  const el = document.getElementById(id);
  if (!el) return null;
  return new Chart(el, {
    type: "line",
    data: {datasets: datasets},
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
      interaction: {mode: "nearest", intersect: false, axis: "x"},
      elements: {point: {radius: 0}, line: {borderWidth: 1.5}},
      scales: {
        x: {type: "linear", title: {display: true, text: xTitle}},
        y: {beginAtZero: true, stacked: !!stacked, title: {display: true, text: yTitle}},
      },
      plugins: {legend: {position: "bottom"}, shade: {until: warmup},
                marks: {spans: xTitle === "seconds" ? D.marks : []}},
    },
  });
}
function line(label, xs, ys, i, extra) {
  return Object.assign({label: label, data: pts(xs, ys), borderColor: COLORS[i % 10],
                        backgroundColor: COLORS[i % 10], spanGaps: true,
                        pointRadius: xs.length < 60 ? 2 : 0}, extra || {});
}
window.tdCharts = [];
if (D.steps) {
  const s = D.steps;
  const stacked = s.phases.map((p, i) => line(p.name, s.x, p.values, i,
      {fill: i === 0 ? "origin" : "-1", stack: "phases", backgroundColor: COLORS[i % 10] + "aa"}));
  const extra = [
    line("longest step" + (s.bucket > 1 ? " in bucket" : ""), s.x, s.max, 7,
         {borderDash: [4, 3], fill: false, stack: "max"}),
    {type: "scatter", label: "outlier steps (> mean + 3 sigma)", stack: "outliers",
     data: s.outliers, backgroundColor: "#c62828", borderColor: "#c62828", pointRadius: 3},
  ];
  window.tdCharts.push(chart("steps", stacked.concat(extra), "step", "ms per step", true,
                             s.warmup));
  document.getElementById("steps-note").textContent =
    (s.bucket > 1 ? "Each point is a bucket of " + s.bucket + " steps: the phases are their " +
     "means (stacked), the dashed line the longest step, so outliers stay visible. " : "") +
    "Shaded: the " + s.warmup + " warm-up steps left out of the diagnosis.";
  if (s.throughput.some(v => v !== null)) {
    window.tdCharts.push(chart("throughput", [line("samples/s", s.t, s.throughput, 0)],
                               "seconds", "samples/s"));
  } else {
    document.getElementById("throughput-note").textContent =
      "Batch sizes are unknown (no DataLoader batch and no doc.step(batch_size=...)): " +
      "steps per second only, in the step-time plot.";
    document.getElementById("throughput").parentElement.style.display = "none";
  }
}
if (D.system) {
  const y = D.system;
  document.getElementById("system-note").textContent =
    (y.bucket > 1 ? "Each point is a bucket of " + y.bucket + " samples (mean; max dashed). "
     : "") + "CPU in % of one core (" + y.cores + " cores: " + 100 * y.cores + "% is all)." +
    (D.marks.some(m => m.kind === "finding")
     ? " Red bands: the time a finding is about (numbered as above)." : "") +
    (D.marks.some(m => m.kind === "profiler")
     ? " Blue band: stepdoctor's own torch.profiler capture (--trace), which slowed those " +
       "steps." : "");
  window.tdCharts.push(chart("cpu", [
    line("this job", y.t, y["job CPU"], 0), line("its workers", y.t, y["workers CPU"], 1),
    line("other processes", y.t, y["other processes CPU"], 3),
    line("whole machine", y.t, y["machine CPU"], 7),
    line("whole machine (max)", y.t, y["machine CPU max"], 7, {borderDash: [4, 3]}),
  ], "seconds", "CPU %"));
  window.tdCharts.push(chart("memory", [
    line("RSS, all processes", y.t, y["RSS"], 0),
    line("RSS (max)", y.t, y["RSS max"], 0, {borderDash: [4, 3]}),
    line("RSS, main process", y.t, y["main process RSS"], 1),
    line("malloc heap in use", y.t, y["malloc heap in use"], 2),
  ], "seconds", "MiB"));
  const io = y.io;
  if (!Object.values(io).some(v => v.some(x => x !== null))) {
    document.getElementById("io").parentElement.style.display = "none";
  } else window.tdCharts.push(chart("io", [
    line("disk read", y.io_t, io["disk read"], 0), line("disk write", y.io_t, io["disk write"], 1),
    line("net sent", y.io_t, io["net sent"], 2),
    line("net received", y.io_t, io["net received"], 3),
  ], "seconds", "MB/s (between readings, once a second)"));
}
function hide(ids, note, text) {
  for (const id of ids) document.getElementById(id).parentElement.style.display = "none";
  document.getElementById(note).textContent = text;
}
if (!D.steps) hide(["steps", "throughput"], "steps-note", "No steps were recorded.");
if (!D.system) hide(["cpu", "memory", "io"], "system-note", "No system samples were taken.");
for (const g of D.gpus) {
  window.tdCharts.push(chart("gpu" + g.index + "-util", [
    line("utilisation", g.t, g["utilisation"], 0),
    line("utilisation (max)", g.t, g["utilisation max"], 0, {borderDash: [4, 3]}),
  ], "seconds", "GPU utilisation %"));
  window.tdCharts.push(chart("gpu" + g.index + "-mem", [
    line("memory used", g.t, g["memory used"], 1),
  ], "seconds", "MiB"));
}
window.tdCharts = window.tdCharts.filter(c => c);
window.tdReady = true;
"""
