#!/usr/bin/env python3
"""Sweep benchmark (not a test; issue 36): one sweep run three ways, each
timed, in the same run: with local processes, on a Ray cluster started here
on loopback (`ray start --head`, two CPUs) with the same cache, and again
locally (nothing left to build). Prints the times, their ratios to the
local run, whether the tables are byte-identical, and the smallest memories.

    .venv/bin/python benchmarks/sweep.py [--sweep examples/sweeps/gap8_memory.yaml] [--out /tmp/sweep_bench]
        [--latency 100000000] [--phases local,ray,again] [-j 2]

The default sweep is 45 gap8 points under QEMU (L1 x L2 x three networks):
about 40 minutes of two cores for the local phase on an idle machine. Ray
must be installed (pip install ray) for the ray phase; without it the
phase is skipped. The Ray phase builds into another folder: its
compilations come from the cache, its runs are new (a run is never cached).
"""

import argparse
import filecmp
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "site_scons"))


def sweep(args, out, *extra):
    cmd = [sys.executable, "-m", "tessera", "sweep", args.sweep, "--out", out, "--cache", args.cache,
           "-j", str(args.jobs)] + (["--latency", str(args.latency)] if args.latency else []) + list(extra)
    start = time.monotonic()
    res = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - start
    last = [l for l in res.stdout.splitlines() if l.startswith("tessera sweep:") or l.startswith("smallest")]
    print(f"  {' '.join(extra) or 'local'}: {took:.0f} s, status {res.returncode}")
    for line in last:
        print("   ", line)
    return took


def ray_head(temp):
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={temp}"], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(1)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit("the Ray head did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", default=os.path.join(ROOT, "examples", "sweeps", "gap8_memory.yaml"))
    ap.add_argument("--out", default="/tmp/sweep_bench")
    ap.add_argument("--latency", type=float, default=None)
    ap.add_argument("--phases", default="local,ray,again")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    args.cache = os.path.join(args.out, "cache")
    phases = args.phases.split(",")
    times = {}
    local, on_ray = os.path.join(args.out, "local"), os.path.join(args.out, "ray")
    if "local" in phases:
        times["local"] = sweep(args, local)
    if "ray" in phases:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("  ray: skipped (pip install ray)")
        else:
            proc, address = ray_head(os.path.join("/tmp", f"ray_bench_{os.getpid()}"))
            try:
                times["ray"] = sweep(args, on_ray, "--ray", address)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=120)
            for name in ("table.csv", "table.json"):
                same = filecmp.cmp(os.path.join(local, name), os.path.join(on_ray, name), shallow=False)
                print(f"  {name}: local and Ray {'identical' if same else 'DIFFER'}")
    if "again" in phases:
        times["again"] = sweep(args, local)
    if "local" in times:
        for name, t in times.items():
            print(f"  {name}: {t:.0f} s = {t / times['local']:.3f} x local")


if __name__ == "__main__":
    main()
