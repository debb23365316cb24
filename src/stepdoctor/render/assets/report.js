// The HTML report's plots (report.html.jinja inlines this): D is the page's data, drawn
// with Chart.js; window.tdReady tells the browser test that every plot is drawn.
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
     ? " Blue band: stepdoctor's own measurement (torch.profiler capture or allocation " +
       "tracing), which slowed those steps." : "");
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
// A JVM's GC logs (stepdoctor logs): each pause by kind over the JVM's uptime, and the heap
// before and after each collection.
(D.jvm || []).forEach((g, i) => {
  const kinds = [...new Set(g.kind)];
  const byKind = kinds.map((k, j) => ({
    type: "scatter", label: k + " pauses", backgroundColor: COLORS[j % 10],
    borderColor: COLORS[j % 10], pointRadius: 2,
    data: g.t.map((t, n) => (g.kind[n] === k ? {x: t, y: g.pause_ms[n]} : null))
      .filter(p => p !== null),
  }));
  window.tdCharts.push(chart("jvm" + i + "-pauses", byKind, "JVM uptime (s)", "pause (ms)"));
  const heap = [line("heap before", g.t, g.heap_before, 3), line("heap after", g.t, g.heap_after, 2),
                line("heap size", g.t, g.heap_total, 7, {borderDash: [4, 3]})];
  if (g.heap_before.some(v => v !== null)) {
    window.tdCharts.push(chart("jvm" + i + "-heap", heap, "JVM uptime (s)", "MiB"));
  } else {
    document.getElementById("jvm" + i + "-heap").parentElement.style.display = "none";
  }
  document.getElementById("jvm" + i + "-note").textContent =
    g.t.length + " pauses of the " + (g.collector || "JVM's") + " collector" +
    (g.stride > 1 ? " (one in " + g.stride + ": the log has more than the page shows)" : "") +
    "; the heap before and after each collection, where the log gives it.";
});
window.tdCharts = window.tdCharts.filter(c => c);
window.tdReady = true;
