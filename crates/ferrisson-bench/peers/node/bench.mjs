// npm redis-semaphore's Mutex (and Semaphore, mode `semaphore`: 20 permits) on the
// ferrisson-bench workloads.
// usage: node bench.mjs URL uncontended|contended|semaphore CLIENTS TASKS DURATION_MS HOLD_MS KEY_PREFIX [WARMUP_MS]
// (WARMUP_MS: the workload runs that long first, uncounted, so that a short run does not count the JIT's warm-up)
// prints one JSON object: total, elapsed_s, per_task, wait_p50_us, wait_p99_us, cycle_p50_us, cycle_p99_us
import Redis from 'ioredis';
import { Mutex, Semaphore } from 'redis-semaphore';
import { performance } from 'node:perf_hooks';

const [url, mode, clientsArg, tasksArg, durationArg, holdArg, prefix, warmupArg] = process.argv.slice(2);
const warmupMs = Number(warmupArg ?? 0);
const clients = Number(clientsArg);
const tasks = Number(tasksArg);
const durationMs = Number(durationArg);
const holdMs = Number(holdArg);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(samples, p) {
  if (samples.length === 0) return 0;
  samples.sort((a, b) => a - b);
  return samples[Math.min(samples.length - 1, Math.round((p / 100) * (samples.length - 1)))];
}

async function main() {
  const connections = [];
  for (let c = 0; c < clients; c++) connections.push(new Redis(url));
  await Promise.all(connections.map((c) => c.ping()));
  const waits = [];
  const cycles = [];
  const perTask = [];
  const start = performance.now() + warmupMs;
  const deadline = start + durationMs;
  const workers = [];
  for (let c = 0; c < clients; c++) {
    for (let t = 0; t < tasks; t++) {
      const key = mode === 'uncontended' ? `${prefix}:${c}:${t}` : prefix;
      workers.push((async () => {
        let n = 0;
        while (performance.now() < deadline) {
          // Library defaults but for a long acquire timeout and no refresh timer.
          const options = { acquireTimeout: 600000, lockTimeout: 10000, refreshInterval: 0 };
          const mutex = mode === 'semaphore'
            ? new Semaphore(connections[c], key, 20, options)
            : new Mutex(connections[c], key, options);
          const t0 = performance.now();
          await mutex.acquire();
          const t1 = performance.now();
          if (holdMs > 0) await sleep(holdMs);
          await mutex.release();
          const t2 = performance.now();
          if (t0 < start) continue;
          waits.push((t1 - t0) * 1000);
          cycles.push((t2 - t0) * 1000);
          n++;
        }
        perTask.push(n);
      })());
    }
  }
  await Promise.all(workers);
  const elapsed = (performance.now() - start) / 1000;
  console.log(JSON.stringify({
    total: perTask.reduce((a, b) => a + b, 0),
    elapsed_s: elapsed,
    per_task: perTask,
    wait_p50_us: percentile(waits, 50),
    wait_p99_us: percentile(waits, 99),
    cycle_p50_us: percentile(cycles, 50),
    cycle_p99_us: percentile(cycles, 99),
  }));
  await Promise.all(connections.map((c) => c.quit()));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
