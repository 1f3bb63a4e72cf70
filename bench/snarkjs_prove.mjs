// In-process timing of snarkjs's Groth16 prover (bench/snarkjs_compare.py runs this):
//   node bench/snarkjs_prove.mjs CIRCUIT.zkey WITNESS.wtns RUNS
// One warm-up proof first (it builds the curve's wasm and worker threads, once per process),
// then RUNS timed calls of groth16.prove(zkey, wtns): each reads the zkey and witness files, as
// snarkjs always does. Prints {"seconds": [...], "cpu_seconds": [...]} on stdout: wall time, and
// the CPU time of the whole process (its worker threads included) during each call.
import { performance } from "node:perf_hooks";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const snarkjs = await import(pathToFileURL(path.join(root, "node_modules/snarkjs/main.js")).href);
const [zkey, wtns, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 3);

await snarkjs.groth16.prove(zkey, wtns);
const seconds = [], cpu_seconds = [];
for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await snarkjs.groth16.prove(zkey, wtns);
    seconds.push((performance.now() - t0) / 1000);
    const c = process.cpuUsage(c0);
    cpu_seconds.push((c.user + c.system) / 1e6);
}
console.log(JSON.stringify({ seconds, cpu_seconds }));
process.exit(0);  // the curve's worker threads would keep the process alive
