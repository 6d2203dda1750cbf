// "Plan a job": the form's inputs become `python -m infralens rank` arguments, run by
// the package in the page's worker (run.js); the table is the command's own table.
"use strict";

(() => {
  const form = document.querySelector("form.infralens-plan");
  if (!form) return;
  const result = document.querySelector(".infralens-plan-result");
  const command = document.querySelector(".infralens-plan-command code");
  const links = JSON.parse(form.dataset.links);
  const hbm = JSON.parse(form.dataset.hbm);
  const FIELDS = ["model", "cluster", "gpus", "seq-len", "global-batch", "micro-batch", "recipe",
    "tp-comm-overlap"];
  // The custom shape: `rank --model`'s shape keys, in the order the command takes them.
  const SHAPE = ["layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size", "gated_mlp"];
  const shapeBox = form.querySelector(".infralens-plan-shape");
  const SVG = "http://www.w3.org/2000/svg";

  function field(name) {
    return form.elements.namedItem(name);
  }

  function custom() {
    return field("model").value === "custom";
  }

  function modelArg() {
    if (!custom()) return field("model").value.trim();
    return SHAPE.map((k) => `${k}=${field(k).value.trim()}`).join(",");
  }

  function argv() {
    const args = [];
    for (const name of FIELDS) {
      const value = name === "model" ? modelArg() : field(name).value.trim();
      if (name === "recipe" && !value) continue;
      if (name === "tp-comm-overlap") {  // a flag: present or absent
        if (value === "on") args.push("--tp-comm-overlap");
        continue;
      }
      args.push(`--${name}`, value);
    }
    return args;
  }

  function shown() {
    // The inputs the address carries: the shape's only for a custom model.
    return [...FIELDS, "gpu", ...(custom() ? SHAPE : [])];
  }

  function svg(tag, attrs, text) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  }

  let charts = 0;
  function chart(data, cls) {
    // A horizontal bar per term: its label links to the section that explains it, its
    // number is printed as the command prints it; the bars scale to the largest.
    const ROW = 22, LABEL = 250, BAR = 270, WIDTH = 640;
    const id = `infralens-chart-${charts++}`;
    const height = ROW * data.bars.length + 8;
    const box = svg("svg", {
      class: `infralens-chart ${cls}`, viewBox: `0 0 ${WIDTH} ${height}`,
      width: "100%", role: "group", "aria-labelledby": id,
    });
    box.appendChild(svg("title", { id }, data.title));
    const top = Math.max(...data.bars.map((b) => b.value), 1e-9);
    data.bars.forEach((bar, i) => {
      const y = 4 + i * ROW;
      const g = svg("g", { class: "infralens-bar", "data-key": bar.key });
      const a = svg("a", { href: links[bar.key] || links["#"] });
      a.appendChild(svg("text", { x: LABEL - 8, y: y + ROW / 2, class: "label" }, bar.label));
      g.appendChild(a);
      const w = Math.max((bar.value / top) * BAR, bar.value > 0 ? 1 : 0);
      g.appendChild(svg("rect", { x: LABEL, y: y + 4, width: w.toFixed(1), height: ROW - 8 }));
      g.appendChild(svg("text", { x: LABEL + w + 6, y: y + ROW / 2, class: "value" },
        `${bar.text} ${data.unit}`));
      box.appendChild(g);
    });
    const figure = document.createElement("figure");
    figure.className = "infralens-plan-chart";
    const caption = document.createElement("figcaption");
    caption.textContent = data.title;
    figure.append(caption, box);
    return figure;
  }

  function link(text, column) {
    const a = document.createElement("a");
    a.href = links[column] || links["#"];
    a.textContent = text;
    return a;
  }

  function table(markdown) {
    // The command's Markdown table, cell for cell, as an HTML table.
    const lines = markdown.split("\n");
    const rows = lines.filter((l) => l.startsWith("|")).map((l) =>
      l.slice(1, -1).split("|").map((c) => c.trim()));
    const [head, , ...body] = rows;
    const t = document.createElement("table");
    t.className = "infralens-plan-table docutils align-default";
    const tr = t.createTHead().insertRow();
    for (const h of head) {
      const th = document.createElement("th");
      th.appendChild(link(h, h));
      tr.appendChild(th);
    }
    const tbody = t.createTBody();
    for (const row of body) {
      const r = tbody.insertRow();
      row.forEach((cell, i) => r.insertCell().appendChild(link(cell, head[i])));
    }
    const caption = lines.filter((l) => l && !l.startsWith("|"));
    return { t, heading: caption[0] || "", notes: caption.slice(1) };
  }

  async function plan() {
    const args = argv();
    const started = performance.now();
    command.textContent = "python -m infralens rank " + args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(" ");
    const params = new URLSearchParams();
    for (const name of shown()) params.set(name, field(name).value.trim());
    history.replaceState(null, "", "?" + params.toString());
    result.replaceChildren(document.createTextNode("Ranking the plans in this page…"));
    let answer;
    try {
      answer = await window.infralensPython("plan_job", [args]);
    } catch (err) {
      result.replaceChildren(document.createTextNode(err.message));
      return;
    }
    if (answer.error) {
      const p = document.createElement("p");
      p.className = "infralens-plan-error";
      p.textContent = answer.error;
      result.replaceChildren(p);
      result.dataset.ms = String(Math.round(performance.now() - started));
      return;
    }
    const { t, heading, notes } = table(answer.table);
    const h = document.createElement("p");
    h.textContent = heading;
    const parts = [h, t];
    for (const note of notes) {
      const p = document.createElement("p");
      p.textContent = note;
      parts.push(p);
    }
    const blob = new Blob([answer.plan], { type: "text/yaml" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "parallelism_plan.yaml";
    a.className = "infralens-plan-download";
    a.textContent = "Download plan 1 as a plan file";
    const p = document.createElement("p");
    p.append(a, " (rank's --write-plan 1: what python -m infralens plan and memory read).");
    const details = document.createElement("div");
    details.className = "infralens-plan-details";
    details.textContent = "Pricing plan 1…";
    parts.push(p, details);
    result.replaceChildren(...parts);
    result.dataset.ms = String(Math.round(performance.now() - started));
    // Then plan 1's memory (`memory`) and its worksheet and step time (`plan`).
    try {
      const more = await window.infralensPython("plan_details", [modelArg(), field("gpu").value]);
      const figures = [];
      if (more.charts.error) {
        const p = document.createElement("p");
        p.className = "infralens-plan-error";
        p.textContent = more.charts.error;
        figures.push(p);
      } else {
        figures.push(chart(more.charts.step, "infralens-chart-step"),
          chart(more.charts.memory, "infralens-chart-memory"));
      }
      const mh = document.createElement("h2");
      mh.appendChild(link("Memory of plan 1", "memory"));
      const mem = document.createElement("pre");
      mem.className = "infralens-plan-memory";
      mem.textContent = more.memory;
      const wh = document.createElement("h2");
      wh.appendChild(link("Plan 1: groups, worksheet and step time", "#"));
      const ws = document.createElement("pre");
      ws.className = "infralens-plan-worksheet";
      ws.textContent = more.worksheet;
      details.replaceChildren(...figures, mh, mem, wh, ws);
    } catch (err) {
      details.textContent = err.message;
    }
  }

  function showShape() {
    shapeBox.hidden = !custom();
  }
  field("model").addEventListener("change", showShape);
  field("cluster").addEventListener("change", () => {
    const chosen = hbm[field("cluster").value];
    if (chosen) field("gpu").value = chosen;
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    plan();
  });
  const given = new URLSearchParams(location.search);
  if ([...FIELDS, "gpu"].some((name) => given.has(name))) {
    for (const name of [...FIELDS, "gpu", ...SHAPE]) {
      if (given.has(name)) field(name).value = given.get(name);
    }
    showShape();
    // run.js (window.infralensPython) may come after this script among the deferred ones.
    if (window.infralensPython) plan();
    else window.addEventListener("DOMContentLoaded", plan, { once: true });
  }
})();
