#!/usr/bin/env node
// Runs AssemblyScript tests of wasmsched policies: compiles each FILE.ts
// given (default: this folder's *.test.ts) with the SDK as the package
// "wasmsched" (and "wasmsched/testing") and the flags of `wasmsched policy
// build` (but the incremental runtime: tests allocate), then calls every
// export named test*, each in a fresh instance. A test fails when it traps
// (a failed assert prints its message). Exit 1 when one fails.
//
//   node abi/assemblyscript/test/run.mjs [--asc PATH] [FILE.ts ...]
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { WASI } from "node:wasi";

const here = dirname(fileURLToPath(import.meta.url));
const sdk = resolve(here, "..");
const args = process.argv.slice(2);
let asc = join(sdk, "node_modules", ".bin", "asc");
const ai = args.indexOf("--asc");
if (ai >= 0) {
  asc = resolve(args[ai + 1]);
  args.splice(ai, 2);
}
const files = args.length > 0 ? args.map((f) => resolve(f)) :
  readdirSync(here).filter((f) => f.endsWith(".test.ts")).map((f) => join(here, f));

const tmp = mkdtempSync(join(tmpdir(), "wasmsched-as-test-"));
mkdirSync(join(tmp, "packages"));
symlinkSync(sdk, join(tmp, "packages", "wasmsched"));
let failed = 0, passed = 0;
try {
  for (const file of files) {
    const out = join(tmp, basename(file, ".ts") + ".wasm");
    try {
      execFileSync(asc, [file, "--path", join(tmp, "packages"), "-o", out, "-O1", "--exportStart", "_initialize",
        "--use", "abort=~lib/wasmsched/index/wsAbort", "--use", "trace=~lib/wasmsched/index/wsTrace",
        "--use", "seed=~lib/wasmsched/index/wsSeed"], { stdio: ["ignore", "inherit", "inherit"] });
    } catch (e) {
      console.error(`FAIL  ${file}: does not compile`);
      failed++;
      continue;
    }
    const mod = new WebAssembly.Module(readFileSync(out));
    const names = WebAssembly.Module.exports(mod).filter((e) => e.kind === "function" && e.name.startsWith("test")).map((e) => e.name);
    if (names.length === 0) {
      console.error(`FAIL  ${file}: exports no test* function`);
      failed++;
    }
    for (const name of names) {
      const wasi = new WASI({ version: "preview1", args: [], env: {} });
      try {
        const inst = new WebAssembly.Instance(mod, wasi.getImportObject());
        wasi.initialize(inst);
        inst.exports[name]();
        console.log(`PASS  ${name}  (${basename(file)})`);
        passed++;
      } catch (e) {
        console.error(`FAIL  ${name}  (${basename(file)}): ${e.message}`);
        failed++;
      }
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
