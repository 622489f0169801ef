"""guard=1: the test harness fills the activation arena's free bytes with a
pattern before each layer and checks them after it. A good plan runs clean;
a layer whose code writes where the plan keeps nothing live (a planted bad
plan: its output moved) fails the run, naming the layer and the offset."""

import json
import os
import re
import subprocess

import pytest

from helpers import scons
from tessera.check import runlog
from tessera.errors import RunError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def live_at(graph, step):
    producer = {l["output"]: i for i, l in enumerate(graph["layers"])}
    last = {}
    for i, l in enumerate(graph["layers"]):
        for name in l["inputs"]:
            last[name] = i
    for name in graph["outputs"]:
        last[name] = len(graph["layers"]) - 1
    return [n for n in graph["tensors"]
            if (0 if n in graph["inputs"] else producer.get(n, 0)) <= step <= last.get(n, -1)]


def test_guard_runs_clean_and_catches_a_write_outside_the_plan(tmp_path):
    scons("target=host", "model=tiny", "guard=1", out=tmp_path, check=True)
    net = tmp_path / "host" / "tiny"
    assert "guard_check(i);" in (net / "src" / "harness.c").read_text()
    assert "TSR guard" not in (net / "run.log").read_text()

    # plant: dw1 (step 1) writes its output where no tensor live at step 1 lies
    graph = json.loads((net / "graph.json").read_text())
    acts = json.loads((net / "memplan.json").read_text())["activations"]
    step = [l["name"] for l in graph["layers"]].index("dw1")
    out = graph["layers"][step]["output"]
    size = 1
    for d in graph["tensors"][out]["shape"]:
        size *= d
    busy = [(acts["offsets"][n], acts["offsets"][n] + _nbytes(graph, n)) for n in live_at(graph, step)]
    spot = next(x for x in range(0, acts["arena"] - size + 1, 4)
                if all(x + size <= lo or x >= hi for lo, hi in busy))
    src = (net / "src" / "dw1.c").read_text()
    planted, n = re.subn(r"(tsr_tile_out\(&out\[b\], ENGINE_ACT, tiny_L2 \+ )\d+,", rf"\g<1>{spot},", src)
    assert n == 1
    (tmp_path / "dw1.c").write_text(planted)
    objs = sorted(str(p) for p in (net / "obj").glob("*.o") if p.name != "dw1.o")
    subprocess.run(["gcc", "-O2", "-std=c99", "-Ikernels/include", f"-I{net / 'src'}", "-c",
                    str(tmp_path / "dw1.c"), "-o", str(tmp_path / "dw1.o")], check=True, cwd=ROOT)
    subprocess.run(["gcc", "-o", str(tmp_path / "bad"), str(tmp_path / "dw1.o"), *objs,
                    str(net / "obj" / "hal" / "hal.o"), str(net / "obj" / "libtessera_kernels.a")], check=True)
    run = subprocess.run([str(tmp_path / "bad")], capture_output=True, text=True, check=True)
    with pytest.raises(RunError) as err:
        runlog.parse(run.stdout, "run.log")
    assert re.search(rf"guard=1: layer dw1 \(step {step}\) wrote the activation arena at offset (\d+)",
                     str(err.value))
    at = int(re.search(r"offset (\d+)", str(err.value)).group(1))
    assert spot <= at < spot + size


def _nbytes(graph, name):
    t = graph["tensors"][name]
    n = {"int8": 1, "uint8": 1, "int32": 4}[t.get("dtype", "int8")]
    for d in t["shape"]:
        n *= d
    return -(-n // 4) * 4
