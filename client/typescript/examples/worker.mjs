#!/usr/bin/env node
// A runnable wasmsched worker: handles the groups given (default "ts").
//
//   WASMSCHED_URL=http://127.0.0.1:8080 WASMSCHED_TOKEN=... node examples/worker.mjs --group ts --slots 4
//
// A run's payload says what to do: "fail" throws (the attempt fails),
// "sleep:S" works S seconds (and ends early when the run is stopped),
// anything else comes back upper-cased as the run's result.
import { parseArgs } from "node:util";
import { setTimeout as delay } from "node:timers/promises";
import { Worker } from "../index.js";

const { values } = parseArgs({
  options: {
    group: { type: "string", multiple: true },
    slots: { type: "string", default: "2" },
    name: { type: "string", default: "node" },
    "heartbeat-ttl": { type: "string", default: "10" },
  },
});

const worker = new Worker({ slots: Number(values.slots), name: values.name, heartbeatTtlMs: Number(values["heartbeat-ttl"]) * 1000 });

async function work(run, signal) {
  process.stderr.write(`run ${run.id} attempt ${run.attempt}: ${JSON.stringify(run.payload)}\n`);
  if (run.payload === "fail") throw new Error("asked to fail");
  if (run.payload.startsWith("sleep:")) {
    const total = Number(run.payload.slice(6)) * 1000;
    for (let t = 0; t < total; t += 100) {
      run.progress(t / total, "sleeping");
      await delay(Math.min(100, total - t), undefined, { signal }); // rejects when the run is stopped
    }
    return "slept";
  }
  return run.payload.toUpperCase();
}

for (const g of values.group ?? ["ts"]) worker.handle(g, work);
await worker.run();
