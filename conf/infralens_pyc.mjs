// Compile a zip of Python sources to bytecode with the pinned Pyodide's own CPython, so
// the pages' interpreter imports its standard library without compiling it first.
// node conf/infralens_pyc.mjs PYODIDE_DIR IN.zip OUT.zip: OUT holds every entry of IN
// and, beside each .py, its .pyc (unchecked-hash: no clock, the same bytes every run).
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [dir, source, target] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(`${dir}/pyodide.mjs`).href);
const py = await loadPyodide({ indexURL: `${dir}/`, fullStdLib: false });
py.FS.writeFile("/tmp/in.zip", readFileSync(source));
py.runPython(`
import importlib.util, marshal, zipfile

with zipfile.ZipFile("/tmp/in.zip") as src, zipfile.ZipFile(
    "/tmp/out.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=9
) as out:
    for name in sorted(src.namelist()):
        data = src.read(name)
        entries = [(name, data)]
        if name.endswith(".py"):
            try:
                code = compile(data, name, "exec", dont_inherit=True)
            except SyntaxError:  # a template or test file that is not meant to import
                code = None
            if code is not None:
                flags = (0b01).to_bytes(4, "little")  # hash-based, source not checked
                head = importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(data)
                entries.append((name[:-3] + ".pyc", head + marshal.dumps(code)))
        for entry, payload in entries:
            info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, payload)
`);
writeFileSync(target, py.FS.readFile("/tmp/out.zip"));
