"""One point of a sweep: an ordinary tessera build (the same SConstruct,
outputs and cache keys as `tessera build`) in the point's own folder, and
the summary of its report.json.

The build runs with the point's folder as SCons's top directory and
`generated/` inside it as `out=`: every point's files sit at the same paths
relative to its top (generated/<target>/<model>/...), which is what SCons's
cache keys hold, so a point built before in any sweep folder, on any
worker, is fetched from the shared `cache=` rather than rebuilt.
"""

import os
import subprocess
import time

from .. import api
from ..util import canon
from . import spec as sweep_spec

RESULT = "result.json"


def _env():
    """The child's environment: tessera importable (a checkout's site_scons
    or the installed package's folder) wherever the worker started."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def error_line(output):
    """The build's one-line error: tessera's own message, else the last line."""
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for prefix in ("tessera: error:", "tessera: FAIL", "scons: *** "):
        hits = [l for l in lines if l.startswith(prefix)]
        if hits:
            return hits[-1]
    return lines[-1] if lines else "no output"


def summary(report):
    """What a sweep keeps of a report.json: the totals a person compares."""
    tot = report.get("totals", {})
    count_key = "cycles" if "cycles" in tot else "instructions" if "instructions" in tot else None
    memory = report.get("memory", {})
    ram = {level: m.get("ram", m.get("peak")) for level, m in memory.items() if "ram" in m}
    cost = tot.get("cost", {})
    out = {"verdict": report.get("verdict"), "layers": tot.get("layers"),
           "count": count_key, "latency": tot.get(count_key) if count_key else None,
           "estimate": cost.get("estimate"), "estimate_error": cost.get("error"),
           "peak": {level: m.get("peak") for level, m in memory.items()},
           "ram": ram,
           "flash": memory.get("flash", {}).get("peak"),
           "peak_activation_bytes": tot.get("peak_activation_bytes"), "weight_bytes": tot.get("weight_bytes")}
    return out


def run_point(point, sweep_dir, cache=None):
    """Build (and run) one point; its result as a dict (never raises for a
    failing build: `status` failed and its one-line `error`)."""
    folder = os.path.join(os.path.abspath(sweep_dir), "points", point["folder"])
    os.makedirs(folder, exist_ok=True)
    derived = sweep_spec.derived_target(point)
    if derived:
        target = os.path.join(folder, derived[0])
        canon.write_atomic(target, derived[1].encode())
    else:
        target = point["target_path"]
    variables = dict(point["variables"])
    if cache:
        variables["cache"] = os.path.abspath(cache)
    cmd = api.scons_command(target, point["model_path"], out=os.path.join(folder, "generated"),
                            run=point["run"], jobs=1, variables=variables)
    start = time.monotonic()
    result = {"id": point["id"], "digest": sweep_spec.digest(point), "status": "failed", "error": None}
    try:
        res = subprocess.run(cmd, cwd=folder, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=point.get("timeout"))
        output, code = res.stdout, res.returncode
    except subprocess.TimeoutExpired as err:
        output, code = err.stdout or "", None
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        output += f"\ntessera: error: the build took more than {point.get('timeout')} s (sweep timeout:)"
    canon.write_atomic(os.path.join(folder, "build.log"), output.encode())
    result["seconds"] = round(time.monotonic() - start, 1)
    # what the build did: files compiled here, and steps SCons fetched from
    # the shared cache (`Retrieved ... from cache`) instead
    lines = output.splitlines()
    result["compiled"] = sum(1 for l in lines if l.startswith("tessera: compile "))
    result["retrieved"] = sum(1 for l in lines if l.startswith("Retrieved `"))
    outdir = os.path.join(folder, "generated", point["target_name"], point["model"])
    report = os.path.join(outdir, "report.json")
    if point["run"] and os.path.exists(report):
        result.update(summary(canon.read_json(report)))
    elif not point["run"] and code == 0:
        result.update(estimate_summary(outdir, target))
    if code == 0 and (not point["run"] or os.path.exists(os.path.join(outdir, ".passed"))):
        result["status"] = "ok"
    else:
        result["error"] = error_line(output)
    return result


def estimate_summary(outdir, target_path):
    """A point built without running (`--estimate`): the cost model's sum
    over the layers' tilings (with the weight stream the plan decided) and
    the memory plan's peaks, plus each level's reserved bytes as the plan counts them, as RAM."""
    from .. import config
    from ..cost import api as cost_api, features, model
    from ..planning.memplan import memory_report

    name = os.path.splitext(os.path.basename(target_path))[0]
    tcfg = config.load_target(target_path, name)
    coefs = cost_api.coefficients(tcfg)
    est = None
    if coefs is not None:
        est = sum(model.estimate(coefs, op, feats) for _, op, feats in features.build_features(outdir, tcfg))
    plan = canon.read_json(os.path.join(outdir, "memplan.json"))
    memory = memory_report(plan)
    written = {plan["tiles"]["level"], plan["activations"]["level"]}
    # the plan's reserved bytes: the YAML's and the network's own data (what the built report counts)
    ram = {lvl: memory[lvl]["peak"] + memory[lvl]["reserved"] for lvl in sorted(written) if lvl in memory}
    return {"verdict": None, "count": tcfg["runner"].get("counts"), "latency": None, "estimate": est,
            "estimate_error": None, "peak": {lvl: m["peak"] for lvl, m in memory.items()}, "ram": ram,
            "flash": memory.get("flash", {}).get("peak")}


def write_result(sweep_dir, point, result):
    """The point is done when this file exists (written atomically)."""
    path = os.path.join(os.path.abspath(sweep_dir), "points", point["folder"], RESULT)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    canon.write_json(path, result)


def read_result(sweep_dir, point):
    """The point's result if it is done with the same inputs, else None."""
    path = os.path.join(os.path.abspath(sweep_dir), "points", point["folder"], RESULT)
    try:
        result = canon.read_json(path)
    except (OSError, ValueError):
        return None
    return result if result.get("digest") == sweep_spec.digest(point) else None
