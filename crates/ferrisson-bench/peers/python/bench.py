"""PyPI python-redis-lock on the ferrisson-bench workloads.

usage: python bench.py URL uncontended|contended CLIENTS TASKS DURATION_MS HOLD_MS KEY_PREFIX [WARMUP_MS]
(WARMUP_MS: the workload runs that long first, uncounted: the threads' start-up)
prints one JSON object: total, elapsed_s, per_task, wait_p50_us, wait_p99_us, cycle_p50_us, cycle_p99_us
"""
import json
import sys
import threading
import time

import redis
import redis_lock


def percentile(samples, p):
    if not samples:
        return 0
    samples.sort()
    return samples[min(len(samples) - 1, round(p / 100 * (len(samples) - 1)))]


def main():
    url, mode, clients, tasks, duration_ms, hold_ms, prefix = sys.argv[1:8]
    warmup = int(sys.argv[8]) / 1000 if len(sys.argv) > 8 else 0
    clients, tasks = int(clients), int(tasks)
    hold = int(hold_ms) / 1000
    connections = [redis.Redis.from_url(url) for _ in range(clients)]
    for c in connections:
        c.ping()
    results = []
    lock = threading.Lock()
    start = time.perf_counter() + warmup
    deadline = start + int(duration_ms) / 1000

    def worker(conn, key):
        n, waits, cycles = 0, [], []
        while time.perf_counter() < deadline:
            # Library defaults but for a lease (expire) of 10 s.
            mutex = redis_lock.Lock(conn, key, expire=10)
            t0 = time.perf_counter()
            mutex.acquire(blocking=True)
            t1 = time.perf_counter()
            if hold:
                time.sleep(hold)
            mutex.release()
            t2 = time.perf_counter()
            if t0 < start:
                continue
            waits.append((t1 - t0) * 1e6)
            cycles.append((t2 - t0) * 1e6)
            n += 1
        with lock:
            results.append((n, waits, cycles))

    threads = []
    for c in range(clients):
        for t in range(tasks):
            key = prefix if mode == "contended" else f"{prefix}:{c}:{t}"
            threads.append(threading.Thread(target=worker, args=(connections[c], key)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    waits = [w for _, ws, _ in results for w in ws]
    cycles = [c for _, _, cs in results for c in cs]
    print(json.dumps({
        "total": sum(n for n, _, _ in results),
        "elapsed_s": elapsed,
        "per_task": [n for n, _, _ in results],
        "wait_p50_us": percentile(waits, 50),
        "wait_p99_us": percentile(waits, 99),
        "cycle_p50_us": percentile(cycles, 50),
        "cycle_p99_us": percentile(cycles, 99),
    }))


if __name__ == "__main__":
    main()
