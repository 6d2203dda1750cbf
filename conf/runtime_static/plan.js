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
  const FIELDS = ["model", "cluster", "gpus", "seq-len", "global-batch", "micro-batch", "recipe"];

  function field(name) {
    return form.elements.namedItem(name);
  }

  function argv() {
    const args = [];
    for (const name of FIELDS) {
      const value = field(name).value.trim();
      if (name === "recipe" && !value) continue;
      args.push(`--${name}`, value);
    }
    return args;
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
    for (const name of [...FIELDS, "gpu"]) params.set(name, field(name).value.trim());
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
      const more = await window.infralensPython("plan_details", [field("model").value.trim(), field("gpu").value]);
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
      details.replaceChildren(mh, mem, wh, ws);
    } catch (err) {
      details.textContent = err.message;
    }
  }

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
    for (const name of [...FIELDS, "gpu"]) {
      if (given.has(name)) field(name).value = given.get(name);
    }
    plan();
  }
})();
