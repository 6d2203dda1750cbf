// The page's Python (a module worker, as Pyodide 314 requires): Pyodide from this site's _static/pyodide/, the infralens wheel and
// the page files from _static/infralens-run/. Started on the first Run; nothing is
// fetched from another host. Messages: {id, call, args, urls} in, {id, result|error} out.
const ROOT = "/home/pyodide/infralens";
let booting = null;

async function bytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.arrayBuffer();
}

async function boot(urls) {
  const { loadPyodide } = await import(urls.pyodide + "pyodide.mjs");
  const [py, wheel, files, yaml, runner] = await Promise.all([
    loadPyodide({ indexURL: urls.pyodide, fullStdLib: false }),
    bytes(urls.wheel),
    bytes(urls.files),
    bytes(urls.yaml).catch(() => null), // PyYAML, for the plan files; optional
    fetch(urls.runner).then((r) => r.text()),
  ]);
  py.FS.mkdirTree(ROOT + "/labs_src");
  py.unpackArchive(files, "zip", { extractDir: ROOT });
  py.unpackArchive(wheel, "zip", { extractDir: ROOT + "/labs_src" });
  if (yaml) py.unpackArchive(yaml, "zip", { extractDir: ROOT + "/labs_src" });
  py.runPython(runner, { filename: "runner.py" });
  py.globals.get("prepare")(ROOT);
  return py;
}

self.onmessage = async (event) => {
  const { id, call, args, urls } = event.data;
  try {
    booting = booting || boot(urls);
    const py = await booting;
    const fn = py.globals.get(call);
    const result = fn(...args.map((a) => (Array.isArray(a) ? py.toPy(a) : a)));
    self.postMessage({ id, result: JSON.parse(result) });
  } catch (err) {
    self.postMessage({ id, error: String(err && err.message ? err.message : err) });
  }
};
