// The page's Python (a module worker, as Pyodide 314 requires): Pyodide from this site's
// _static/pyodide/, the infralens wheel and the page files from _static/infralens-run/.
// Started on the first Run; nothing is fetched from another host. Messages:
// {id, call, args, urls} in, {id, result|error, boot} out (boot: the start's phases in ms,
// with the first answer); {warm: urls} fetches and compiles the interpreter ahead of a click.
const ROOT = "/home/pyodide/infralens";
let booting = null;
let warming = null;
let boot = null; // the phases of the start, sent once

async function bytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.arrayBuffer();
}

function warm(urls) {
  // The interpreter's wasm, fetched and compiled while the pointer rests on a Run button;
  // the start that follows instantiates this module instead of compiling it again.
  if (warming) return;
  import(urls.pyodide + "pyodide.mjs").catch(() => null);
  warming = WebAssembly.compileStreaming(fetch(urls.pyodide + "pyodide.asm.wasm"))
    .catch(() => null);
}

// Pyodide instantiates its wasm with WebAssembly.instantiateStreaming (this worker's
// own global): hand it the module warm() compiled, if there is one.
const instantiateStreaming = WebAssembly.instantiateStreaming;
WebAssembly.instantiateStreaming = async (source, imports) => {
  const module = warming && (await warming);
  warming = null;
  if (!module) return instantiateStreaming(source, imports);
  return { module, instance: await WebAssembly.instantiate(module, imports) };
};

async function start(urls) {
  const t0 = performance.now();
  const phases = {};
  const mark = (name) => { phases[name] = Math.round(performance.now() - t0); };
  const { loadPyodide } = await import(urls.pyodide + "pyodide.mjs");
  mark("loader");
  const [py, wheel, files, yaml, runner] = await Promise.all([
    loadPyodide({ indexURL: urls.pyodide, fullStdLib: false }).then((p) => { mark("pyodide"); return p; }),
    bytes(urls.wheel),
    bytes(urls.files),
    bytes(urls.yaml).catch(() => null), // PyYAML, for the plan files; optional
    fetch(urls.runner).then((r) => r.text()),
  ]);
  py.FS.mkdirTree(ROOT + "/labs_src");
  py.unpackArchive(files, "zip", { extractDir: ROOT });
  py.unpackArchive(wheel, "zip", { extractDir: ROOT + "/labs_src" });
  if (yaml) py.unpackArchive(yaml, "zip", { extractDir: ROOT + "/labs_src" });
  mark("unpacked");
  py.runPython(runner, { filename: "runner.py" });
  py.globals.get("prepare")(ROOT);
  mark("runner");
  boot = phases;
  boot.t0 = t0;
  return py;
}

self.onmessage = async (event) => {
  if (event.data.warm) {
    warm(event.data.warm);
    return;
  }
  const { id, call, args, urls } = event.data;
  try {
    booting = booting || start(urls);
    const py = await booting;
    const fn = py.globals.get(call);
    const result = fn(...args.map((a) => (Array.isArray(a) ? py.toPy(a) : a)));
    const reply = { id, result: JSON.parse(result) };
    if (boot) {
      boot.answered = Math.round(performance.now() - boot.t0);
      delete boot.t0;
      reply.boot = boot;
      boot = null;
    }
    self.postMessage(reply);
  } catch (err) {
    self.postMessage({ id, error: String(err && err.message ? err.message : err) });
  }
};
