// The HTML report's flame graphs (report.html.jinja inlines this after report.js): one icicle
// per phase of the sampled stacks in D.flame, the outermost call on top. Click a box to zoom
// into it, the top bar to zoom out. Every name is set as textContent, never parsed as HTML.
"use strict";
(function () {
  const F = D.flame;
  const box = document.getElementById("flame");
  if (!F || !F.counts.length || !box) {
    const note = document.getElementById("flame-note");
    if (note) note.textContent = "No stacks were sampled.";
    if (box) box.style.display = "none";
    return;
  }
  const ROW = 18, MIN_WIDTH = 0.002;
  const stacks = new Map(F.stacks.map(s => [s[0], s[1]]));
  const phases = [...new Set(F.counts.map(c => c[0]))]
    .sort((a, b) => F.order.indexOf(a) - F.order.indexOf(b));
  function tree(phase) {
    const root = {frame: -1, n: 0, kids: new Map(), parent: null};
    for (const [p, stack, n] of F.counts) {
      if (p !== phase) continue;
      root.n += n;
      let node = root;
      for (const f of stacks.get(stack) || []) {
        let kid = node.kids.get(f);
        if (!kid) { kid = {frame: f, n: 0, kids: new Map(), parent: node}; node.kids.set(f, kid); }
        kid.n += n; node = kid;
      }
    }
    return root;
  }
  function label(node, phase) {
    if (node.frame < 0) return F.labels[phase] || phase;
    return F.frames[node.frame][0];
  }
  function tip(node, total, phase) {
    const share = (100 * node.n / total).toFixed(1) + "% of " + (F.labels[phase] || phase);
    if (node.frame < 0) return share + " (" + node.n + " samples)";
    const [fn, file, line, user] = F.frames[node.frame];
    return fn + " (" + file + ":" + line + ")" + (user ? "" : " [library]") +
      " - " + share + ", " + node.n + " samples";
  }
  const select = document.getElementById("flame-phase");
  for (const p of phases) {
    const opt = document.createElement("option");
    opt.value = p; opt.textContent = (F.labels[p] || p) + " (" +
      F.counts.filter(c => c[0] === p).reduce((s, c) => s + c[2], 0) + " samples)";
    select.appendChild(opt);
  }
  function draw(phase, focus) {
    box.textContent = "";
    const root = focus || tree(phase);
    let top = 0, path = [];
    for (let a = root.parent; a; a = a.parent) path.unshift(a);
    let total = root; while (total.parent) total = total.parent;
    const bar = (node, x, w, depth) => {
      const el = document.createElement("div");
      el.className = "fl" + (node.frame >= 0 && !F.frames[node.frame][3] ? " lib" : "");
      el.style.left = (100 * x) + "%"; el.style.width = (100 * w) + "%";
      el.style.top = (depth * ROW) + "px";
      el.textContent = label(node, phase);
      el.title = tip(node, total.n, phase);
      el.addEventListener("click", () => draw(phase, node.frame < 0 && !node.parent ? null : node));
      box.appendChild(el);
      return el;
    };
    for (const a of path) bar(a, 0, 1, top++).classList.add("up");
    const walk = (node, x, w, depth) => {
      if (w < MIN_WIDTH) return;
      bar(node, x, w, depth);
      let at = x;
      const kids = [...node.kids.values()].sort((a, b) => b.n - a.n);
      for (const kid of kids) {
        const kw = w * kid.n / node.n;
        walk(kid, at, kw, depth + 1);
        at += kw;
      }
    };
    walk(root, 0, 1, top);
    let depth = 0;
    for (const el of box.children) depth = Math.max(depth, parseInt(el.style.top, 10) / ROW + 1);
    box.style.height = (depth * ROW + 4) + "px";
  }
  select.addEventListener("change", () => draw(select.value, null));
  const first = phases.includes(F.first) ? F.first : phases[0];
  select.value = first;
  draw(first, null);
  window.tdFlame = {phases: phases, draw: draw};
})();
