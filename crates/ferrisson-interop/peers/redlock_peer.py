"""A Redlock peer for ferrisson's interop tests: redis-py's `Lock` (PyPI `redis`).

Usage:
  redlock_peer.py take URL NAME WAIT_S LEASE_MS   take the lock (waiting up to WAIT_S, 0: one
                                                  try), print "held" or "busy"; when held, wait
                                                  for a line on stdin, release, print "released"
  redlock_peer.py contend URL NAME ROUNDS         print "ready" once connected, take and
                                                  release ROUNDS times, each hold checked for
                                                  company (NAME:inside); print JSON
"""
import json
import sys
import time

import redis


def main():
    mode, url, name = sys.argv[1:4]
    r = redis.Redis.from_url(url)
    if mode == "take":
        wait_s, lease_ms = float(sys.argv[4]), int(sys.argv[5])
        lock = r.lock(name, timeout=lease_ms / 1000, sleep=0.01)
        if wait_s > 0:
            held = lock.acquire(blocking=True, blocking_timeout=wait_s)
        else:
            held = lock.acquire(blocking=False)
        print("held" if held else "busy", flush=True)
        if held:
            sys.stdin.readline()
            lock.release()
            print("released", flush=True)
    elif mode == "contend":
        rounds = int(sys.argv[4])
        overlaps = 0
        r.ping()
        print("ready", flush=True)
        for _ in range(rounds):
            lock = r.lock(name, timeout=10, sleep=0.005)
            lock.acquire(blocking=True)
            if r.incr(name + ":inside") != 1:
                overlaps += 1
            time.sleep(0.002)
            r.decr(name + ":inside")
            lock.release()
        print(json.dumps({"rounds": rounds, "overlaps": overlaps}), flush=True)
    else:
        sys.exit("unknown mode " + mode)


main()
