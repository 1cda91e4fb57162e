// A Redlock peer for ferrisson's interop tests: npm `redlock` over ioredis.
//
// Usage:
//   node redlock_peer.mjs take URL NAME WAIT_S LEASE_MS   take the lock (waiting up to WAIT_S,
//                                                         0: one try), print "held" or "busy";
//                                                         when held, wait for a line on stdin,
//                                                         release, print "released"
//   node redlock_peer.mjs contend URL NAME ROUNDS         print "ready" once connected, take
//                                                         and release ROUNDS times, each hold
//                                                         checked for company (NAME:inside);
//                                                         print JSON
import { createInterface } from "node:readline";
import Redis from "ioredis";
import Redlock from "redlock";

const [mode, url, name, a, b] = process.argv.slice(2);
const client = new Redis(url);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function line() {
  const rl = createInterface({ input: process.stdin });
  for await (const l of rl) {
    rl.close();
    return l;
  }
  return "";
}

if (mode === "take") {
  const waitMs = Number(a) * 1000;
  const lease = Number(b);
  const redlock = new Redlock([client], {
    retryCount: waitMs > 0 ? Math.ceil(waitMs / 10) : 0,
    retryDelay: 10,
    retryJitter: 0,
  });
  let lock = null;
  try {
    lock = await redlock.acquire([name], lease);
  } catch (e) {
    if (e.name !== "ExecutionError") throw e;
  }
  console.log(lock ? "held" : "busy");
  if (lock) {
    await line();
    await lock.release();
    console.log("released");
  }
} else if (mode === "contend") {
  const rounds = Number(a);
  const redlock = new Redlock([client], { retryCount: -1, retryDelay: 5, retryJitter: 5 });
  let overlaps = 0;
  await client.ping();
  console.log("ready");
  for (let i = 0; i < rounds; i++) {
    const lock = await redlock.acquire([name], 10000);
    if ((await client.incr(name + ":inside")) !== 1) overlaps++;
    await sleep(2);
    await client.decr(name + ":inside");
    await lock.release();
  }
  console.log(JSON.stringify({ rounds, overlaps }));
} else {
  console.error("unknown mode " + mode);
  process.exitCode = 2;
}
await client.quit();
