"""tessera sweep: a design-space sweep (docs/sweeps.md): every point of a
sweep file built as an ordinary tessera build, in parallel processes or on
a Ray cluster, into one table, a Pareto page and the smallest memories."""

import os
import sys

from .. import sweep


def register(sub):
    p = sub.add_parser(
        "sweep", help="build many points (models x targets x L1, L2, cores, fusion...) into one table",
        description=__doc__.split("\n\n")[0],
        epilog="Writes <out>/table.csv, table.json, pareto.html (and smallest.json with a latency); each point "
        "builds in <out>/points/<model>/<target>/. A point is done when its result.json exists: rerunning "
        "finishes only the missing points. docs/sweeps.md has the sweep file's keys.")
    p.add_argument("file", help="the sweep file (YAML: models, targets, axes)")
    p.add_argument("--out", default=None, help="the sweep's folder (default: ./sweeps/<sweep name>)")
    p.add_argument("--cache", default=None, help="the shared build cache (SCons CacheDir; default: <out>/cache)")
    p.add_argument("-j", "--jobs", type=int, help="points at once (default: the cores, fewer if memory is short)")
    p.add_argument("--ray", metavar="ADDRESS", help="run the points as Ray tasks on this cluster (host:port or "
                   "ray://host:port); the folders and the cache must be on a file system the workers share")
    p.add_argument("--estimate", action="store_true", help="no runs: the cost model's estimate stands in for "
                   "the measurement (tiling and memory plan only)")
    p.add_argument("--latency", type=float, help="the smallest memories reaching this many instructions or "
                   "cycles (default: the sweep file's latency:)")
    p.add_argument("--list", action="store_true", help="print the points and stop")
    p.set_defaults(func=run)


def run(args):
    spec = sweep.load(args.file)
    if args.estimate:
        spec["run"] = False
    points = sweep.expand(spec)
    if args.list:
        for p in points:
            print(p["id"])
        return 0
    out = os.path.abspath(args.out or os.path.join("sweeps", spec["name"]))
    cache = args.cache or os.path.join(out, "cache")
    counter = {"fresh": 0, "done": 0, "failed": 0, "compiled": 0, "retrieved": 0}

    def show(point, result, fresh):
        counter["fresh" if fresh else "done"] += 1
        if fresh:
            counter["compiled"] += result.get("compiled", 0)
            counter["retrieved"] += result.get("retrieved", 0)
        if result["status"] != "ok":
            counter["failed"] += 1
        n = counter["fresh"] + counter["done"]
        what = (result.get("latency") or result.get("estimate")) if result["status"] == "ok" else result.get("error")
        tag = "" if fresh else " (done before)"
        print(f"[{n}/{len(points)}] {result['status']:6} {point['id']}{tag}: {what}", flush=True)

    where = f"Ray cluster {args.ray}" if args.ray else f"{args.jobs or sweep.execute.default_jobs()} processes"
    print(f"tessera sweep {spec['name']}: {len(points)} points on {where}, cache {cache}", flush=True)
    try:
        results = sweep.run(spec, points, out, cache=cache, jobs=args.jobs, ray=args.ray, on_result=show)
    except KeyboardInterrupt:
        n = counter["fresh"] + counter["done"]
        sys.stderr.write(f"tessera sweep: interrupted with {n} of {len(points)} points done (their result files "
                         f"are written); run the same command again to finish the others\n")
        return 130
    files = sweep.write_outputs(spec, points, results, out, limit=args.latency)
    small = sweep.smallest(spec, sweep.table(spec, points, results), args.latency)
    if small:
        for model, ans in small["models"].items():
            print(f"smallest for <= {small['latency']:.0f}: {model}: "
                  + ("none reaches it" if ans is None else ", ".join(f"{k}={v}" for k, v in ans["config"].items())))
        print("smallest for <= %.0f: all models: %s" % (small["latency"], "none" if small["all"] is None else
              ", ".join(f"{k}={v}" for k, v in small["all"]["config"].items())))
    print(f"tessera sweep: {len(points)} points, {counter['fresh']} built now, {counter['done']} done before, "
          f"{counter['failed']} failed ({counter['compiled']} files compiled, {counter['retrieved']} steps from the "
          f"cache); {files['csv']}, {files['html']}", flush=True)
    sys.stdout.flush()
    return 1 if counter["failed"] == len(points) else 0
