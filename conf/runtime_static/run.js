// A "Run" control on every >>> example and the answer boxes of exercises. The
// Python runtime (Pyodide, this site's copy) starts in a Web Worker on the first
// click; each block then becomes editable and its output appears under it.
"use strict";

(() => {
  const here = new URL(document.currentScript.src);
  const base = new URL("./", here);
  const wheelName = document.currentScript.dataset.wheel || "";
  const urls = {
    pyodide: new URL("../pyodide/", base).href,
    wheel: new URL(wheelName || "none", base).href,
    files: new URL("page-files.zip", base).href,
    yaml: new URL("pyyaml.zip", base).href,
    runner: new URL("runner.py", base).href,
  };
  const page = location.pathname;
  const SERVE =
    "Examples run only from a web server: in the repository, run " +
    "python3 -m http.server -d build/html and open http://localhost:8000/.";
  const NO_RUNTIME = "This build has no Python runtime; build the handbook with nox -s docs.";
  let worker = null;
  let nextId = 0;
  const waiting = new Map();

  function startWorker() {
    if (worker) return;
    worker = new Worker(new URL("worker.js", base), { type: "module" });
    worker.onmessage = (event) => {
      const { id, result, error, boot } = event.data;
      if (boot) window.infralensBoot = boot; // the start's phases, for the browser tests
      const done = waiting.get(id);
      waiting.delete(id);
      if (error !== undefined) done.reject(new Error(error));
      else done.resolve(result);
    };
    worker.onerror = (event) => {
      for (const done of waiting.values()) done.reject(new Error(event.message || NO_RUNTIME));
      waiting.clear();
    };
  }

  function call(name, args) {
    if (location.protocol === "file:") return Promise.reject(new Error(SERVE));
    if (!wheelName) return Promise.reject(new Error(NO_RUNTIME));
    startWorker();
    const id = nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker.postMessage({ id, call: name, args, urls });
    });
  }
  window.infralensPython = call;

  // The pointer on (or the focus at) a Run control: fetch and compile the interpreter
  // now, so a click starts Python sooner. Python itself starts only on a click.
  function warm(event) {
    const target = event.target instanceof Element && event.target.closest(
      "button.infralens-run, form.infralens-check button, form.infralens-plan button");
    if (!target || worker || location.protocol === "file:" || !wheelName) return;
    startWorker();
    worker.postMessage({ warm: urls });
  }
  document.addEventListener("pointerover", warm, { passive: true });
  document.addEventListener("focusin", warm);

  // -- Run controls ---------------------------------------------------------------
  const article = document.querySelector("article") || document.body;
  const blocks = [...article.querySelectorAll("div.highlight-pycon, div.doctest")]
    .filter((div) => !div.parentElement.closest("div.highlight-pycon, div.doctest"))
    .map((div) => ({ div, pre: div.querySelector("pre") }))
    .filter(({ pre }) => pre && /^\s*>>>/m.test(pre.textContent));
  const moduleTargets = [...article.querySelectorAll('[id^="module-"]')];

  function moduleOf(div) {
    const dd = div.closest("dl.py > dd");
    if (dd && dd.previousElementSibling && dd.previousElementSibling.id) {
      return dd.previousElementSibling.id;
    }
    let found = "";
    for (const target of moduleTargets) {
      // eslint-disable-next-line no-bitwise
      if (target.compareDocumentPosition(div) & Node.DOCUMENT_POSITION_FOLLOWING) {
        found = target.id.slice("module-".length);
      }
    }
    return found;
  }

  const pageBlocks = [];
  for (const block of blocks) {
    block.module = moduleOf(block.div);
    block.original = block.pre.innerText;
    block.primed = false;
    if (!block.module) {
      block.index = pageBlocks.length;
      pageBlocks.push(block);
    }
  }

  function primeBefore(index) {
    // The page's earlier blocks, as printed, not yet run: Sphinx runs them in order.
    const texts = [];
    for (const block of pageBlocks.slice(0, index)) {
      if (!block.primed) texts.push(block.original);
      block.primed = true;
    }
    return texts;
  }

  function outputBox(block) {
    if (!block.output) {
      block.output = document.createElement("pre");
      block.output.className = "infralens-output";
      block.output.setAttribute("role", "status");
      block.output.setAttribute("aria-live", "polite");
      block.output.setAttribute("aria-label", "output");
      block.div.after(block.output);
    }
    return block.output;
  }

  async function run(block) {
    const out = outputBox(block);
    const pre = block.pre;
    if (location.protocol === "file:") {
      out.textContent = SERVE;
      out.classList.add("infralens-note");
      return;
    }
    if (pre.getAttribute("contenteditable") !== "true") {
      pre.setAttribute("contenteditable", "true");
      pre.setAttribute("spellcheck", "false");
      pre.setAttribute("aria-label", "editable example; Ctrl+Enter runs it");
      pre.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey || event.shiftKey)) {
          event.preventDefault();
          run(block);
        }
      });
    }
    block.button.disabled = true;
    out.classList.remove("infralens-error", "infralens-note");
    out.textContent = worker ? "Running…" : "Starting Python in this page…";
    const started = performance.now();
    try {
      const prime = block.module ? [] : primeBefore(block.index);
      block.primed = true;
      const result = await call("run_block", [pre.innerText, block.module, page, prime]);
      out.textContent = result.output || "(no output)";
      if (!result.ok) out.classList.add("infralens-error");
    } catch (err) {
      out.textContent = err.message;
      out.classList.add("infralens-note");
    } finally {
      block.button.disabled = false;
      out.dataset.ms = String(Math.round(performance.now() - started));
    }
  }

  for (const block of blocks) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "infralens-run";
    button.textContent = "Run";
    button.title = "Run this example in the page (Python in your browser)";
    button.addEventListener("click", () => run(block));
    block.button = button;
    (block.div.querySelector("div.highlight") || block.div).appendChild(button);
  }

  // -- A lab's shown code: its object's docstring examples, run under it ----------------
  for (const wrapper of article.querySelectorAll("div.literal-block-wrapper")) {
    const link = wrapper.querySelector(".code-block-caption a[href*='_modules/infralens/']");
    const match = link && /_modules\/(infralens\/.+)\.html#(.+)$/.exec(link.getAttribute("href"));
    const highlight = wrapper.querySelector("div.highlight");
    if (!match || !highlight) continue;
    const dotted = match[1].replace(/\//g, ".") + "." + match[2];
    const button = document.createElement("button");
    button.type = "button";
    button.className = "infralens-run";
    button.textContent = "Run";
    button.title = `Run the examples of ${dotted} in the page`;
    highlight.appendChild(button);
    let block = null;
    button.addEventListener("click", async () => {
      if (block) return run(block);
      button.disabled = true;
      const note = document.createElement("pre");
      note.className = "infralens-output infralens-note";
      note.textContent = location.protocol === "file:" ? SERVE : "Starting Python in this page…";
      wrapper.after(note);
      if (location.protocol === "file:") {
        button.disabled = false;
        note.remove();
        wrapper.after(note);
        return;
      }
      try {
        const { text } = await call("examples_of", [dotted]);
        const div = document.createElement("div");
        div.className = "highlight-pycon notranslate infralens-examples";
        div.innerHTML = '<div class="highlight"><pre></pre></div>';
        div.querySelector("pre").textContent = text || ">>> ";
        note.replaceWith(div);
        block = { div, pre: div.querySelector("pre"), module: dotted, original: text, button };
        await run(block);
      } catch (err) {
        note.textContent = err.message;
      } finally {
        button.disabled = false;
      }
    });
  }

  // -- Exercise checks ----------------------------------------------------------
  for (const form of article.querySelectorAll("form.infralens-check")) {
    const status = form.parentElement.querySelector(".infralens-verdict");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const given = form.querySelector("input, select").value;
      if (!given.trim()) return;
      status.className = "infralens-verdict";
      status.textContent = worker ? "Checking…" : "Starting Python in this page…";
      // The worked answer's examples (in the dropdown after the box) define its names.
      let index = pageBlocks.length;
      const answer = form.closest(".infralens-check-box").nextElementSibling;
      if (answer) {
        const inside = pageBlocks.filter((b) => answer.contains(b.div));
        if (inside.length) index = inside[inside.length - 1].index + 1;
      }
      try {
        const { ok, verdict } = await call("check", [
          given, form.dataset.expect, form.dataset.kind,
          Number(form.dataset.tolerance), page, primeBefore(index),
        ]);
        status.textContent = `${ok ? "Right" : `Not right (${verdict})`}: ${form.dataset.why}`;
        status.classList.add(ok ? "infralens-right" : "infralens-wrong");
      } catch (err) {
        status.textContent = err.message;
      }
    });
  }
})();
