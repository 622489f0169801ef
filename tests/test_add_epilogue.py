"""Fusion's add epilogue (kind "add"): a convolution layer whose output only
the next residual add reads runs the add on its L1 output tiles.

- kernels: each library's own add kernel (reference tsr_add, PULP-NN
  pnn_add, CMSIS-NN tsr_cmsis_add) called as the epilogue calls it, in place
  over the producer's output tile (either operand), core by core, equals the
  add run apart and the golden model, bit for bit;
- engine, tiler and selector on small hand-built graphs: which producers
  qualify and why not, the skip buffer in the tiling, min_transfer's count;
- a host build: bit-exact, the producer's output has no place in L2, the
  DMA counters equal the selector's count step by step.
"""

import ctypes
import json
from ctypes import POINTER, c_int8

import numpy as np
import pytest
from hypothesis import given, strategies as st

from helpers import scons
from test_cmsis_nn import host_lib  # noqa: F401
from test_pulp_nn_kernels import pnn  # noqa: F401
from test_ref_kernels import NCORES, OFFSETS, SETTINGS, AddArgs, arrays, int8s, lib, requants  # noqa: F401
from tessera import fusion
from tessera.fusion import transfer
from tessera.golden import ops
from tessera.ir import Graph, Layer, Requant, Tensor
from tessera.tiler import solve_layer
from tessera.config.views import kernel_library, tiler_layer

# ---- kernels -----------------------------------------------------------------

LIBS = (("lib", "tsr_add"), ("pnn", "pnn_add"), ("host_lib", "tsr_cmsis_add"))


@st.composite
def epilogue_cases(draw):
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 8)))
    produced, rng = arrays(draw, shape)
    skip = int8s(rng, shape)
    in_offset = [draw(OFFSETS), draw(OFFSETS)]
    # what the frontend makes: in_mul up to 2**30, the scale in the shift;
    # per tensor (the engine's condition), half-up or floor rounding
    in_mul = [draw(st.integers(0, 2**30)), draw(st.integers(0, 2**30))]
    first = draw(st.booleans())        # the producer's output is the add's first input
    a, b = (produced, skip) if first else (skip, produced)
    acc = ops.add(a, b, in_mul, in_offset)
    rq = draw(requants(1, int(np.abs(acc).max(initial=0)), per_channel=False, mul_max=2**20))
    return produced, skip, first, in_mul, in_offset, rq, draw(NCORES)


def _call(fn, a, b, out, in_mul, in_offset, rq, ncores):
    rqs = rq.struct()
    args = AddArgs(a.ctypes.data_as(POINTER(c_int8)), b.ctypes.data_as(POINTER(c_int8)), out.ctypes.data, a.size,
                   (ctypes.c_int32 * 2)(*in_mul), (ctypes.c_int32 * 2)(*in_offset), (ctypes.c_int32 * 2)(0, 0),
                   ctypes.pointer(rqs))
    for core in range(ncores):
        fn(ctypes.byref(args), core, ncores)


@given(epilogue_cases(), st.sampled_from(LIBS))
@SETTINGS
def test_add_in_place_over_the_output_tile_equals_the_add_apart(request, case, which):
    produced, skip, first, in_mul, in_offset, rq, ncores = case
    fixture, name = which
    fn = getattr(request.getfixturevalue(fixture), name)
    a, b = (produced, skip) if first else (skip, produced)
    want = ops.requantize(ops.add(a, b, in_mul, in_offset), rq.golden).astype(np.int8)
    apart = np.full(produced.shape, 0x5A, np.int8)
    _call(fn, a, b, apart, in_mul, in_offset, rq, ncores)
    np.testing.assert_array_equal(apart, want)
    # the epilogue: the output tile buffer holds the producer's output and
    # receives the sum (tsr_add, pnn_add: each core its own run; the CMSIS-NN
    # kernel on core 0)
    tile = produced.copy()
    a, b = (tile, skip) if first else (skip, tile)
    _call(fn, a, b, tile, in_mul, in_offset, rq, ncores)
    np.testing.assert_array_equal(tile, want)


# ---- engine, tiler, selector --------------------------------------------------

def rq(n, zp=0):
    return Requant(mul=[1 << 14] * n, add=[0], shift=[20] * n, rounding="half_up", zero_point=zp, lo=-128, hi=127)


def residual_graph(h=12, w=10, c=8, skip_first=False, extra_reader=False, co=None):
    """x -> pw -> y; s = add(x, y) (or add(y, x)): the projection and its add."""
    co = co or c
    t = {"x": Tensor("x", [h, w, c]), "y": Tensor("y", [h, w, co]), "s": Tensor("s", [h, w, c])}
    add_in = ["x", "y"] if skip_first else ["y", "x"]
    layers = [Layer("pw", "pointwise", ["x"], "y", input_offset=5, weights="pw_w", bias="pw_b", requant=rq(co, 2)),
              Layer("add", "add", add_in, "s", in_mul=[1 << 12, 1 << 13], in_offset=[3, -2], requant=rq(1, 1))]
    outputs = ["s"]
    if extra_reader:
        t["z"] = Tensor("z", [h, w, co])
        layers.append(Layer("pool", "maxpool", ["y"], "z", kernel=[1, 1]))
        outputs.append("z")
    return Graph("g", "test", t, layers, ["x"], outputs)


KERNELS = kernel_library("reference")["tiler"]


def target(budget):
    return {"l1_budget": budget, "cores": 8, "buffering": 2, "kernels": KERNELS, "fused_scheme": {}}


def test_engine_finds_the_epilogue_and_says_why_not():
    assert fusion.candidates(residual_graph()) == [
        {"kind": "add", "layers": ["pw", "add"], "group": "pw+add", "ok": True, "reason": "fusable"}]
    other = fusion.candidates(residual_graph(extra_reader=True))[0]
    assert not other["ok"] and "other readers" in other["reason"]
    # a broadcast add (the producer's output is not the add's shape) is no epilogue
    g = residual_graph(co=1)
    assert not fusion.candidates(g)[0]["ok"]


def test_epilogue_tiling_holds_the_skip_tile_beside_the_output():
    g = residual_graph(h=16, w=16, c=32)
    pair = fusion.pair_view(g, "pw", "add")
    alone = solve_layer(tiler_layer(g.layer("pw"), g), target(64000))
    ft = fusion.solve_dw_pw(pair, target(64000))
    assert ft["feasible"] and ft["l1_bytes"]["skip"] == ft["l1_bytes"]["out"]
    # whole, single-buffered: one more output-sized buffer than the layer alone
    assert not alone["tiled"] and not ft["tiling"]["tiled"]
    assert ft["l1_bytes"]["total"] == alone["l1_bytes"]["total"] + alone["l1_bytes"]["out"]
    # where the layer fits whole but not with the skip tile, the epilogue is tiled
    tight = alone["l1_bytes"]["total"]
    ft = fusion.solve_dw_pw(pair, target(tight))
    assert ft["feasible"] and ft["tiling"]["tiled"] and ft["l1_bytes"]["total"] <= tight
    # and with no room for any tile, infeasible with the reason
    ft = fusion.solve_dw_pw(pair, target(100))
    assert not ft["feasible"] and "do not fit" in ft["reason"]


def test_min_transfer_takes_the_epilogue_and_counts_its_bytes():
    g = residual_graph(h=12, w=10, c=8)
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), target(64000)) for layer in g.layers}
    cands = fusion.candidates(g)
    pair = fusion.pair_view(g, "pw", "add")
    fused = {"pw+add": (pair, fusion.solve_dw_pw(pair, target(64000)))}
    s = fusion.select(g, tilings, fused, "min_transfer", cands)
    assert [st_["step"] for st_ in s["steps"]] == ["pw+add"]
    x = g.tensor("x").nbytes
    # apart: x in, y out; x and y in, s out. The epilogue: x in, x's tile in (the skip), s out
    assert s["totals"]["unfused_activation_transfer_bytes"] == 5 * x
    assert s["totals"]["activation_transfer_bytes"] == 3 * x
    # tiled: every output tile's box of the skip comes in once
    small = {"pw+add": (pair, fusion.solve_dw_pw(pair, target(900)))}
    ft = small["pw+add"][1]
    assert ft["tiling"]["tiled"]
    assert transfer.fused_transfer(pair, ft) == transfer.layer_transfer(tiler_layer(g.layer("pw"), g),
                                                                        ft["tiling"]) + x
    s = fusion.select(g, tilings, fused, "none", cands)
    assert [st_["step"] for st_ in s["steps"]] == ["pw", "add"]


# ---- a build -------------------------------------------------------------------

def test_epilogue_on_host_is_bit_exact_and_moves_what_the_selector_counted(tmp_path):
    """tiny's `branch` pointwise feeds only `add`: with min_transfer the add
    runs on its tiles; its output never reaches L2, the network is
    bit-exact, and the DMA counters are the selector's count per step."""
    out = tmp_path / "out"
    scons("target=host", "model=tiny", "fusion=min_transfer", out=out, check=True)
    net = out / "host" / "tiny"
    verdict = json.loads((net / "verdict.json").read_text())
    sched = json.loads((net / "schedule.json").read_text())
    plan = json.loads((net / "memplan.json").read_text())
    graph = json.loads((net / "graph.json").read_text())
    assert verdict["verdict"] == "pass"
    assert [s["layers"] for s in sched["steps"] if s["kind"] == "add"] == [["branch", "add"]]
    produced = next(layer["output"] for layer in graph["layers"] if layer["name"] == "branch")
    assert produced not in plan["activations"]["offsets"]
    names = [layer["name"] for layer in graph["layers"]]
    moved = dict(zip(names, (d[0] for d in verdict["dma"])))
    assert moved["add"] == 0
    assert [moved[s["layers"][0]] for s in sched["steps"]] == [s["activation_transfer_bytes"] for s in sched["steps"]]
    assert "add epilogue" in (net / "src" / "branch.c").read_text()


def chain_graph(h=12, w=10, c=8):
    """x -> dw -> m -> pw -> y; s = add(y, x): a MobileNetV2 block without
    its expansion (b1's shape)."""
    t = {"x": Tensor("x", [h, w, c]), "m": Tensor("m", [h, w, c]), "y": Tensor("y", [h, w, c]),
         "s": Tensor("s", [h, w, c])}
    layers = [Layer("dw", "depthwise", ["x"], "m", kernel=[3, 3], stride=[1, 1], pad=[1] * 4, input_offset=3,
                    weights="dw_w", bias="dw_b", requant=rq(c, -5)),
              Layer("pw", "pointwise", ["m"], "y", input_offset=5, weights="pw_w", bias="pw_b", requant=rq(c, 2)),
              Layer("add", "add", ["y", "x"], "s", in_mul=[1 << 12, 1 << 13], in_offset=[3, -2], requant=rq(1, 1))]
    return Graph("g", "test", t, layers, ["x"], ["s"])


def test_min_transfer_takes_the_depthwise_pointwise_and_add_as_one_step():
    g = chain_graph()
    cands = fusion.candidates(g)
    assert [(c["group"], c["kind"], c["ok"]) for c in cands] == [
        ("dw+pw", "dw_pw", True), ("pw+add", "add", True), ("dw+pw+add", "dw_pw_add", True)]
    tgt = dict(target(64000), fused_scheme={"dw_pw": "per_core"})
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    fused = {}
    for c in cands:
        pair = fusion.pair_view(g, *c["layers"])
        fused[c["group"]] = (pair, fusion.solve_dw_pw(pair, tgt))
    three = fused["dw+pw+add"][1]
    # one band: the depthwise's input in, the add's other input's rows in, the sum out
    assert three["layers"] == ["dw", "pw", "add"] and three["l1_bytes"]["skip"] == three["l1_bytes"]["out"]
    s = fusion.select(g, tilings, fused, "min_transfer", cands)
    assert [(st_["step"], st_["kind"]) for st_ in s["steps"]] == [("dw+pw+add", "dw_pw_add")]
    x = g.tensor("x").nbytes
    assert s["totals"]["unfused_activation_transfer_bytes"] == 7 * x
    assert s["totals"]["activation_transfer_bytes"] == 3 * x
    apart = {c["group"]: c["why_apart"] for c in s["candidates"] if not c["chosen"]}
    assert "(dw+pw+add) save more" in apart["dw+pw"] and "(dw+pw+add) save more" in apart["pw+add"]


_SMALL_MBV2 = ("description: 0.25-MobileNetV2 at 40x40 (add epilogue test)\n"
               "generator: {arch: mobilenet_v2, width: 0.25, resolution: 40, classes: 10, seed: 0}\n"
               "quantization: {calibration_samples: 4, seed: 0}\ninput: {seed: 0}\n")


def _small_mbv2_epilogues(tmp_path, target):
    """A generated 0.25-MobileNetV2 at 40x40 with min_transfer: bit-exact,
    every add an epilogue (DW->PW steps with their add); the run's activation DMA equals the selector's
    count (the host and stm32h7 count activations apart from weights; every layer tiled, as the selector
    counts them)."""
    mpath = tmp_path / "mbv2_small.yaml"
    mpath.write_text(_SMALL_MBV2)
    out = tmp_path / "out"
    scons(f"target={target}", f"model={mpath}", "fusion=min_transfer", "direct=0", out=out, check=True)
    net = out / target / "mbv2_small"
    verdict = json.loads((net / "verdict.json").read_text())
    sched = json.loads((net / "schedule.json").read_text())
    assert verdict["verdict"] == "pass"
    # every residual add runs inside the step producing its input
    adds = {layer["name"] for layer in json.loads((net / "graph.json").read_text())["layers"] if layer["op"] == "add"}
    inside = {n for s in sched["steps"] if s["kind"] in ("add", "dw_pw_add") for n in s["layers"]}
    assert adds and adds <= inside and "dw_pw_add" in {s["kind"] for s in sched["steps"]}
    for s in sched["steps"]:
        if s["kind"] in ("add", "dw_pw_add"):
            assert "add epilogue" in (net / "src" / f"{s['layers'][0]}.c").read_text()
    return verdict, sched


def test_small_mobilenet_v2_epilogues_on_host_are_bit_exact(tmp_path):
    verdict, sched = _small_mbv2_epilogues(tmp_path, "host")
    assert sum(d[0] for d in verdict["dma"]) == sched["totals"]["activation_transfer_bytes"]


@pytest.mark.qemu
def test_small_mobilenet_v2_epilogues_on_stm32h7_are_bit_exact(tmp_path):
    import shutil
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("qemu-system-arm not installed")
    verdict, sched = _small_mbv2_epilogues(tmp_path, "stm32h7")
    assert sum(d[0] for d in verdict["dma"]) == sched["totals"]["activation_transfer_bytes"]


def _pw_dw_add_model(tmp_path):
    """A QDQ graph (ONNX Runtime's quantize_static) whose PW->DW pair feeds
    a residual add: conv0 -> pw -> dw, add(dw, conv0)."""
    from onnx import helper

    from opgraphs import conv, model, quantize

    rng = np.random.default_rng(0)
    inits = {}
    nodes = [conv(rng, inits, "c0", "input", 4, 16, 3, pad=1), helper.make_node("Relu", ["c0"], ["r0"]),
             conv(rng, inits, "pw", "r0", 16, 16, 1), helper.make_node("Relu", ["pw"], ["r1"]),
             conv(rng, inits, "dw", "r1", 16, 16, 3, group=16, pad=1), helper.make_node("Relu", ["dw"], ["r2"]),
             helper.make_node("Add", ["r2", "r0"], ["output"], name="res")]
    path = quantize(model(nodes, inits, [1, 4, 16, 16], [1, 16, 16, 16]), tmp_path / "pw_dw_add.onnx")
    yaml_path = tmp_path / "pw_dw_add.yaml"
    yaml_path.write_text(f"description: PW->DW pair and its residual add\nonnx: {path}\ninput: {{seed: 1}}\n")
    return yaml_path


def _run_pw_dw_add(tmp_path, target, l1=None):
    import yaml

    from helpers import ROOT
    name = target
    if l1 is not None:
        with open(f"{ROOT}/targets/{target}.yaml") as f:
            data = yaml.safe_load(f)
        data["memory"]["L1"]["size"] = l1
        name = f"{target}_small"
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
        target = str(tmp_path / f"{name}.yaml")
    out = tmp_path / "out"
    scons(f"target={target}", f"model={_pw_dw_add_model(tmp_path)}", "fusion=min_transfer", out=out, check=True)
    net = out / name / "pw_dw_add"
    verdict = json.loads((net / "verdict.json").read_text())
    sched = json.loads((net / "schedule.json").read_text())
    assert verdict["verdict"] == "pass"
    steps = [s for s in sched["steps"] if s["kind"] == "pw_dw_add"]
    assert len(steps) == 1 and len(steps[0]["layers"]) == 3
    ft = json.loads((net / "tiling" / f"{steps[0]['step']}.fused.json").read_text())
    assert "add epilogue" in (net / "src" / f"{steps[0]['layers'][0]}.c").read_text()
    return verdict, sched, ft


def test_pw_dw_step_with_its_add_epilogue_in_bands_on_host_is_bit_exact(tmp_path):
    """With 6000 bytes of L1 the PW->DW step and its add run in several
    bands; bit-exact, and the DMA counters equal the selector's count."""
    verdict, sched, ft = _run_pw_dw_add(tmp_path, "host", l1=6000)
    assert len(ft["bands"]) > 1 and ft["l1_bytes"]["skip"] == ft["l1_bytes"]["out"]
    assert sum(d[0] for d in verdict["dma"]) == sched["totals"]["activation_transfer_bytes"]


@pytest.mark.qemu
def test_pw_dw_step_with_its_add_epilogue_on_gap8_is_bit_exact(tmp_path):
    import shutil
    if shutil.which("qemu-system-riscv32") is None:
        pytest.skip("qemu-system-riscv32 not installed")
    _run_pw_dw_add(tmp_path, "gap8", l1=16000)
