"""SCons tool `tessera`: a quantized network as build steps.

    env.Tool('tessera', toolpath=['<tessera>/site_scons/site_tools'])
    net = env.TesseraNetwork(target='host', model='tiny')

The library (site_scons/tessera/) does the work; this glue only declares
steps, their exact inputs (Value nodes holding canonical JSON), and the
library code each step runs (SCons does not see code a Python action calls).
"""

import os
import sys

from SCons.Script import Action, Exit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

from tessera import canon, config, prepare  # noqa: E402
from tessera.errors import TesseraError  # noqa: E402

from . import steps  # noqa: E402


def fail(err):
    """Report a user mistake in one line and stop, without a traceback."""
    sys.stderr.write(f"tessera: error: {err}\n")
    Exit(2)


def _log(message):
    print(f"tessera: {message}", flush=True)


def TesseraNetwork(env, target, model, out=None):
    """Declare every step that builds (target, model); returns a dict of
    the main nodes: report, graph, golden (and more as the build grows)."""
    out = out or env.get("TESSERA_OUT") or os.path.join(ROOT, "generated")
    try:
        tname, tpath = config.resolve("target", target, ROOT)
        mname, mpath = config.resolve("model", model, ROOT)
        tcfg = config.load_target(tpath, tname)
        mcfg = config.load_model(mpath, mname)
        outdir = os.path.join(os.path.abspath(out), tname, mname)
        # generated models are keyed by their parameters, so a cache may be
        # shared between output directories (the tests share one)
        model_cache = os.environ.get("TESSERA_MODEL_CACHE") or os.path.join(os.path.abspath(out), ".models")
        paths = prepare.prepare(mcfg, outdir, model_cache, log=_log)
    except TesseraError as err:
        fail(err)
    nodes = {"outdir": outdir, "graph": env.File(paths["graph"]), "golden": env.File(paths["golden"])}
    title = env.Value(canon.dumps({"target": tname, "model": mname}), name=f"{tname}/{mname}")
    report = env.Command(os.path.join(outdir, "report.json"),
                         [paths["graph"], paths["weights"], title],
                         Action(steps.report, "tessera: report $TARGET"))
    env.Depends(report, canon.source_files("report", "ir", "canon"))
    nodes["report"] = report
    return nodes


def exists(env):
    return True


def generate(env):
    env.AddMethod(TesseraNetwork, "TesseraNetwork")
