"""A pulp_nn pointwise whose only reader is a 3x3 depthwise writes that
tensor channel-major where the plan finds it pays and fits (the default;
chw=0 turns it off; docs/gvsoc.md, "Depthwise, session 10" and "session
11"). The kernels are tests/test_pulp_nn_gvsoc.py's; here the network: which
tensors the plan makes channel-major, that nothing overlaps them, that the
generated code stores and reads them so, and that the run is bit-exact on
GVSoC (the harness hashes them in HWC order, as the golden tensors)."""

import json
import os

import pytest

from helpers import scons
from tessera import ir
from tessera.config import views
from tessera.pipeline import plan
from test_gvsoc import GVSOC_MARKS, _target

pytestmark = GVSOC_MARKS


def _read(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """mbv1_025_128 on pulp_open with fusion=none (every pointwise ->
    depthwise pair its own two steps), channel-major by default."""
    out = str(tmp_path_factory.mktemp("chw"))
    scons("-j2", "target=pulp_open", "model=mbv1_025_128", "fusion=none", out=out, check=True)
    return os.path.join(out, "pulp_open", "mbv1_025_128")


def test_bit_exact_with_channel_major_tensors(built):
    assert _read(os.path.join(built, "verdict.json"))["verdict"] == "pass"
    chw = _read(os.path.join(built, "memplan.json"))["activations"]["chw"]
    # the plan's list is the pairs whose tiles make them pay (L2 holds them
    # all), each tensor once, in order
    graph, tilings = _graph_tilings(built)
    chosen = plan.chw_chosen(plan.chw_pairs(graph, _target()), None, tilings, graph, _price(graph))
    assert chw == sorted(graph.layer(pw).output for pw, _ in chosen)
    assert "pw6_QuantizeLinear_Output" in chw
    assert "conv0_QuantizeLinear_Output" in chw     # the first convolution -> dw1 too


def _graph_tilings(built):
    graph = ir.Graph.from_json(_read(os.path.join(built, "graph.json")))
    return graph, {layer.name: _read(os.path.join(built, "tiling", layer.name + ".json")) for layer in graph.layers}


def _price(graph):
    return plan.chw_price(graph, plan.chw_pairs(graph, _target()), _target(), views.kernel_library("pulp_nn"))


def _memory(graph, usable=None):
    """The plan's view of pulp_open for the graph; where `usable` is given,
    the activations' level that many bytes and the weights on a level of
    their own (memplan checks each apart)."""
    mem = plan.memory(graph, _target(), views.kernel_library("pulp_nn"), True, "none",
                      plan.row_bands(graph, True), "", chw_on=True)
    if usable is not None:
        level = mem["place"]["activations"]
        levels = dict(mem["levels"], weights=mem["levels"][level])
        levels[level] = dict(levels[level], usable=usable)
        mem = dict(mem, levels=levels, place=dict(mem["place"], weights="weights"))
    return mem


def test_pairs_the_activation_level_cannot_hold_stay_hwc(built):
    """The paying pairs that do not raise the activation peak are taken
    first; the others only where the level has room."""
    graph, tilings = _graph_tilings(built)
    docs = list(tilings.values())
    mem = _memory(graph)
    assert mem["chw_pairs"] and not plan.memory(graph, _target(), views.kernel_library("pulp_nn"), True, "none",
                                                set(), "", chw_on=False).get("chw_pairs")
    hwc, _ = plan.plan(graph, dict(mem, chw_pairs=[]), docs)
    roomy, _ = plan.plan(graph, mem, docs)
    assert roomy["activations"]["peak"] > hwc["activations"]["peak"]     # some pair gives up an overlap
    # L2 as large as the plan without channel-major tensors needs: only
    # those that keep its peak
    tight, _ = plan.plan(graph, _memory(graph, hwc["activations"]["peak"]), docs)
    assert tight["activations"]["peak"] == hwc["activations"]["peak"]
    assert set(tight["activations"].get("chw", [])) < set(roomy["activations"]["chw"])
    assert "pw1_QuantizeLinear_Output" in set(roomy["activations"]["chw"]) - set(tight["activations"]["chw"])
    assert tight["activations"].get("chw")        # and those are still taken


def test_the_generated_code_stores_and_reads_them_channel_major(built):
    with open(os.path.join(built, "src", "pw6.c")) as f:
        pw = f.read()
    with open(os.path.join(built, "src", "dw7.c")) as f:
        dw = f.read()
    assert "pnn_pointwise_chw(" in pw and "tsr_tile_out_chw(" in pw and "tsr_tile_out(" not in pw
    assert "pnn_depthwise_chw(" in dw and "tsr_tile_in_chw(" in dw and "tsr_tile_in(" not in dw
    # PULP-open's tile loops: L1 offsets as immediates, the next tile's row by DMA
    # (docs/gvsoc.md, "Between the kernel calls")
    assert "static const uint32_t l1_" not in dw and "#define l1_in0(b) (" in dw
    with open(os.path.join(built, "src", "dw1.c")) as f:
        dw1 = f.read()     # 4 tiles, 2 buffers
    assert "next = ahead;" in dw1 and "&ahead, &tiles[i + 2], sizeof(tsr_tile_t)" in dw1
    # the first tile's copies start before the argument structs are cleared
    # and filled (docs/gvsoc.md, "Between the kernel calls, session 12")
    for text, first in ((dw1, "load(&next, 0, 0, in, w);"), (dw, "load(&tiles[0], 0, 0, in, w);")):
        body = text[text.index("(void)\n{"):]
        assert body.index(first) < body.index("tsr_conv_args_t a = {0};")
        assert body.count(first) == 1
    with open(os.path.join(built, "src", "pw13.c")) as f:
        assert "pnn_pointwise(" in f.read()      # its reader is the pool
    # the first convolution stores channel-major for dw1, in bands of whole rows
    with open(os.path.join(built, "src", "conv0.c")) as f:
        conv = f.read()
    assert "pnn_conv2d_chw(" in conv and "tsr_tile_out_chw(" in conv and "tsr_tile_out(" not in conv
    assert "pnn_depthwise_chw(" in dw1 and "tsr_tile_in_chw(" in dw1
    assert _read(os.path.join(built, "tiling", "conv0.json"))["tile"]["w"] == 64


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
    graph, tilings = _graph_tilings(built)
    target, price = _target(), _price(graph)
    pairs = plan.chw_pairs(graph, target)
    assert ["pw6", "dw7"] in pairs
    # a fused step's layers keep their tensor in L1 (and HWC)
    sched = {"steps": [{"kind": "layer", "layers": [n]} for n in ("pw5", "dw6")]
             + [{"kind": "pw_dw", "layers": ["pw6", "dw7"]}]}
    chosen = plan.chw_chosen(pairs, sched, tilings, graph, price)
    assert ["pw6", "dw7"] not in chosen and ["pw5", "dw6"] in chosen
    # boxes of more channels than the DMA queue takes not covering whole
    # rows (one command a channel), or depthwise rows not a multiple of 4
    # bytes (no gain): left HWC
    alone = {"steps": [{"kind": "layer", "layers": [n]} for n in ("pw6", "dw7")]}
    wide = dict(tilings["pw6"], tile=dict(tilings["pw6"]["tile"], w=3, c=64))
    assert plan.chw_chosen([["pw6", "dw7"]], alone, dict(tilings, pw6=wide), graph, price) == []
    # as many channels as the queue takes: free, the pair pays
    few = dict(tilings["pw6"], tile=dict(tilings["pw6"]["tile"], w=3, c=40))
    assert plan.chw_chosen([["pw6", "dw7"]], alone, dict(tilings, pw6=few), graph, price) == [["pw6", "dw7"]]
    odd = dict(tilings["dw7"], in_tile=dict(tilings["dw7"]["in_tile"], w=6, c=8))
    assert plan.chw_chosen([["pw6", "dw7"]], alone, dict(tilings, dw7=odd), graph, price) == []
    assert plan.chw_chosen([["pw6", "dw7"]], alone, tilings, graph, price) == [["pw6", "dw7"]]
    # the portable path (no Xpulp: gap8 on QEMU) has no channel-major kernels worth it
    portable = dict(target, toolchain=dict(target["toolchain"], isa=[]))
    assert plan.chw_pairs(graph, portable) == []
