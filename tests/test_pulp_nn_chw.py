"""chw=1: a pulp_nn pointwise whose only reader is a 3x3 depthwise writes that
tensor channel-major (docs/gvsoc.md, "Depthwise, session 10"). The kernels
are tests/test_pulp_nn_gvsoc.py's; here the network: which tensors the plan
makes channel-major, that nothing overlaps them, that the generated code
stores and reads them so, and that the run is bit-exact on GVSoC (the
harness hashes them in HWC order, as the golden tensors)."""

import json
import os

import pytest

from helpers import scons
from tessera import ir
from tessera.pipeline import plan
from test_gvsoc import GVSOC_MARKS, _target

pytestmark = GVSOC_MARKS


def _read(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """mbv1_025_128 on pulp_open with fusion=none (every pointwise ->
    depthwise pair its own two steps) and chw=1."""
    out = str(tmp_path_factory.mktemp("chw"))
    scons("-j2", "target=pulp_open", "model=mbv1_025_128", "fusion=none", "chw=1", out=out, check=True)
    return os.path.join(out, "pulp_open", "mbv1_025_128")


def test_bit_exact_with_channel_major_tensors(built):
    assert _read(os.path.join(built, "verdict.json"))["verdict"] == "pass"
    chw = _read(os.path.join(built, "memplan.json"))["activations"]["chw"]
    # the plan's list is the pairs the tiles allow (whole planes a tile for
    # the 8x8 layers), each tensor once, in order
    graph = ir.Graph.from_json(_read(os.path.join(built, "graph.json")))
    tilings = {layer.name: _read(os.path.join(built, "tiling", layer.name + ".json")) for layer in graph.layers}
    chosen = plan.chw_chosen(plan.chw_pairs(graph, _target()), None, tilings, graph)
    assert chw == sorted(graph.layer(pw).output for pw, _ in chosen)
    assert "pw6_QuantizeLinear_Output" in chw


def test_the_generated_code_stores_and_reads_them_channel_major(built):
    with open(os.path.join(built, "src", "pw6.c")) as f:
        pw = f.read()
    with open(os.path.join(built, "src", "dw7.c")) as f:
        dw = f.read()
    assert "pnn_pointwise_chw(" in pw and "tsr_tile_out_chw(" in pw and "tsr_tile_out(" not in pw
    assert "pnn_depthwise_chw(" in dw and "tsr_tile_in_chw(" in dw and "tsr_tile_in(" not in dw
    with open(os.path.join(built, "src", "pw13.c")) as f:
        assert "pnn_pointwise(" in f.read()      # its reader is the pool


def test_no_overlap_on_a_channel_major_tensor(built):
    p = _read(os.path.join(built, "memplan.json"))["activations"]
    graph = ir.Graph.from_json(_read(os.path.join(built, "graph.json")))
    off = p["offsets"]
    for name in p["chw"]:
        writer = next(layer for layer in graph.layers if layer.output == name)
        reader = next(layer for layer in graph.layers if name in layer.inputs)
        for a, b in ((writer.inputs[0], name), (name, reader.output)):
            lo, hi = off[a], off[a] + graph.tensor(a).nbytes
            lo2, hi2 = off[b], off[b] + graph.tensor(b).nbytes
            assert hi <= lo2 or hi2 <= lo, (a, b)


def test_fused_pairs_and_other_targets_stay_hwc(built):
    graph = ir.Graph.from_json(_read(os.path.join(built, "graph.json")))
    tilings = {layer.name: _read(os.path.join(built, "tiling", layer.name + ".json")) for layer in graph.layers}
    target = _target()
    pairs = plan.chw_pairs(graph, target)
    assert ["pw6", "dw7"] in pairs
    # a fused step's layers keep their tensor in L1 (and HWC)
    sched = {"steps": [{"kind": "layer", "layers": [n]} for n in ("pw5", "dw6")]
             + [{"kind": "pw_dw", "layers": ["pw6", "dw7"]}]}
    chosen = plan.chw_chosen(pairs, sched, tilings, graph)
    assert ["pw6", "dw7"] not in chosen and ["pw5", "dw6"] in chosen
    # boxes of many channels not covering whole rows (one DMA command a
    # channel), or depthwise rows not a multiple of 4 bytes: left HWC
    alone = {"steps": [{"kind": "layer", "layers": [n]} for n in ("pw6", "dw7")]}
    wide = dict(tilings["pw6"], tile=dict(tilings["pw6"]["tile"], w=3, c=64))
    assert plan.chw_chosen([["pw6", "dw7"]], alone, dict(tilings, pw6=wide), graph) == []
    odd = dict(tilings["dw7"], in_tile=dict(tilings["dw7"]["in_tile"], w=6, c=8))
    assert plan.chw_chosen([["pw6", "dw7"]], alone, dict(tilings, dw7=odd), graph) == []
    assert plan.chw_chosen([["pw6", "dw7"]], alone, tilings, graph) == [["pw6", "dw7"]]
    # the portable path (no Xpulp: gap8 on QEMU) has no channel-major kernels worth it
    portable = dict(target, toolchain=dict(target["toolchain"], isa=[]))
    assert plan.chw_pairs(graph, portable) == []
