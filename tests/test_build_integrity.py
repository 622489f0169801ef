"""Builds that are interrupted, broken or damaged record nothing they did not earn:
Ctrl-C during tiling stops the build with a non-zero exit and the rebuild
equals a clean build; a build that fails after a passing one leaves no
`.passed`, report or firmware of the old success behind; generated files
damaged after a build are made again."""

import filecmp
import os
import signal
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper

from helpers import MODEL_CACHE, ROOT, float_model, one_error, quantize, scons


def _tilings(outdir):
    tdir = os.path.join(outdir, "tiling")
    return {n: os.path.join(tdir, n) for n in sorted(os.listdir(tdir))}


def test_ctrl_c_during_tiling_stops_and_the_rebuild_equals_a_clean_build(tmp_path):
    model = "mbv1_025_128"
    out = tmp_path / "interrupted"
    plan = out / "host" / model / "memplan.json"
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", "target=host", f"model={model}", str(plan)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("tessera: tile"):
            # as a terminal's Ctrl-C would: SIGINT while a solve runs
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate()[0]
    text = "".join(seen) + rest
    assert proc.returncode != 0, text
    assert "interrupted" in text.lower(), text
    assert "Traceback" not in text
    assert not plan.exists()

    # the rebuild finishes the job; every tiling equals a clean build's
    scons("target=host", f"model={model}", str(plan), out=out, check=True)
    clean = tmp_path / "clean"
    scons("target=host", f"model={model}", str(clean / "host" / model / "memplan.json"), out=clean, check=True)
    a, b = _tilings(out / "host" / model), _tilings(clean / "host" / model)
    assert sorted(a) == sorted(b)
    assert [n for n in a if not filecmp.cmp(a[n], b[n], shallow=False)] == []
    assert filecmp.cmp(plan, clean / "host" / model / "memplan.json", shallow=False)


def _small_model(tmp_path):
    """A quantized conv + relu, tmp_path/net.onnx, and its model YAML
    (returned)."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["output"], name="relu")]
    model = float_model(nodes, {"w": rng.standard_normal((8, 3, 3, 3)) * 0.3, "b": rng.standard_normal(8) * 0.1},
                        [1, 3, 8, 8], [1, 8, 8, 8])
    quantize(model, tmp_path / "net.onnx")
    yml = tmp_path / "net.yaml"
    yml.write_text("description: a small conv\nonnx: net.onnx\ninput: {seed: 0}\n")
    return yml


def test_a_failed_build_leaves_no_stale_success(tmp_path):
    yml = _small_model(tmp_path)
    out = tmp_path / "out"
    scons("target=host", f"model={yml}", out=out, check=True)
    outdir = out / "host" / "net"
    assert (outdir / ".passed").exists() and (outdir / "report.json").exists()

    # the model breaks: the build fails in one line and the old success is gone
    onnx_path = tmp_path / "net.onnx"
    onnx_path.write_bytes(onnx_path.read_bytes()[:200])
    line = one_error(scons("target=host", f"model={yml}", out=out))
    assert "net.onnx" in line
    left = sorted(os.listdir(outdir))
    assert not {".passed", "report.json", "verdict.json", "run.log", "firmware"} & set(left), left


def test_a_failed_step_after_a_pass_retracts_the_success(tmp_path):
    # a passing build, then an L1 too small for any tile: the tiling step
    # fails during the build (not while SConstruct is read)
    yml = _small_model(tmp_path)
    target = tmp_path / "tiny_l1.yaml"
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        host = f.read()
    target.write_text(host)
    out = tmp_path / "out"
    scons(f"target={target}", f"model={yml}", out=out, check=True)
    outdir = out / "tiny_l1" / "net"
    assert (outdir / ".passed").exists()
    target.write_text(host.replace("64000", "40"))
    res = scons(f"target={target}", f"model={yml}", out=out)
    assert res.returncode != 0
    assert "Traceback" not in res.stdout + res.stderr
    left = set(os.listdir(outdir))
    assert not {".passed", "report.json", "verdict.json", "firmware"} & left, left


SOLVE_UNDER_CTRL_C = r"""
import os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from ortools.sat.python import cp_model
from tessera import config
from tessera.config import views
from tessera.tiler import solve_layer
import tessera.tiler.model as tiler_model

# CP-SAT's full search, not the tiler's lean one (util.solver.lean_search):
# a solve that lasts long enough for the signal to land inside the search
tiler_model.lean_search = lambda solver: solver
real_solve = cp_model.CpSolver.solve

def solve_with_ctrl_c(self, model, *args):
    # SIGINT from another process while CP-SAT searches, as a terminal sends it
    subprocess.Popen(["sh", "-c", f"sleep 0.05; kill -INT {os.getpid()}"])
    return real_solve(self, model, *args)

cp_model.CpSolver.solve = solve_with_ctrl_c
target = config.load_target(sys.argv[2], "gap8")
tview = views.tiler_target(target, views.kernel_library(target["kernels"]))
layer = {"name": "big", "op": "conv2d", "in": [128, 128, 64], "out": [128, 128, 128], "kernel": [3, 3],
         "stride": [1, 1], "pad": [1, 1, 1, 1], "in_bytes": 1, "out_bytes": 1, "n_inputs": 1,
         "w_bytes_per_cout": 576, "param_bytes_per_cout": 8}
try:
    print("tiling", solve_layer(layer, tview))
except KeyboardInterrupt:
    print("interrupted")
"""


def test_the_tiler_does_not_swallow_ctrl_c():
    # CP-SAT catches SIGINT by default and returns its best tile so far;
    # the tiler must let the interrupt through instead of returning it
    res = subprocess.run([sys.executable, "-c", SOLVE_UNDER_CTRL_C, os.path.join(ROOT, "site_scons"),
                          os.path.join(ROOT, "targets", "gap8.yaml")], capture_output=True, text=True)
    assert res.stdout.strip() == "interrupted", res.stdout + res.stderr


def test_damaged_generated_files_are_made_again(tmp_path):
    out = tmp_path / "out"
    scons("target=host", "model=tiny", out=out, check=True)
    outdir = out / "host" / "tiny"
    tiling = sorted((outdir / "tiling").glob("*[!e].json"))[0]   # a tiling, not a .solve.json
    source = sorted((outdir / "src").glob("*.c"))[0]
    # the model preparation's outputs too (written when SConstruct is read)
    prepared = [outdir / "graph.json", outdir / "golden.npz"]
    originals = {p: p.read_bytes() for p in [tiling, source] + prepared}
    for p, data in originals.items():
        p.write_bytes(data[: len(data) // 2])    # truncated, as by a full disk or a crash
    scons("target=host", "model=tiny", out=out, check=True)
    assert {p: p.read_bytes() for p in originals} == originals
    assert (outdir / ".passed").exists()
