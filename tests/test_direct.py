"""Layers run in place (tessera.planning.inplace): the kernel's own loop order gives
the distance the output may start below the input, the build-time replay
(tessera.planning.hazard) accepts a plan at that distance and names the step and
address of a plan one byte closer, and on stm32f4 the firmware with layers
in place is bit-exact under QEMU and needs less RAM than with a tile arena."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from helpers import chain_graph
from tessera.codegen.libraries import cmsis_nn
from tessera.ir import Graph, Layer, Requant, Tensor
from tessera.planning import hazard, inplace as direct, memplan

MEMORY = {"levels": {"L1": {"size": 1 << 20, "usable": 1 << 20, "kind": "sram", "writable": True},
                     "L2": {"size": 1 << 20, "usable": 1 << 20, "kind": "sram", "writable": True},
                     "flash": {"size": 1 << 20, "usable": 1 << 20, "kind": "flash", "writable": False}},
          "place": {"tiles": "L1", "activations": "L2", "weights": "flash"}}


def functions(graph):
    """{layer: the C function CMSIS-NN's glue calls} for the layers that may run in place."""
    return {n: cmsis_nn.kernel_function(graph.layer(n), graph=graph) for n in direct.candidates(graph, "cmsis_nn")}


def kind_of(layer, graph):
    return direct.eligible(graph, functions(graph)).get(layer.name)


def rq(n):
    # CMSIS-NN's arithmetic (half-up rounding, no additive term): its kernels run
    return Requant(mul=[1 << 20] * n, add=[0], shift=[24] * n)


def graph3(op, hw, c, k, s, pad, co):
    return chain_graph(op, hw, c, k, s, pad, co, rq)


def tilings(graph):
    return {layer.name: {"layer": layer.name, "tiled": True, "buffering": 2, "n_inputs": 1,
                         "tile": {"h": 1, "w": 1, "c": 1}, "l1_budget": 1 << 20,
                         "l1_bytes": {"in": 64, "out": 64, "weights": 64, "params": 64, "scratch": 0, "total": 512}}
            for layer in graph.layers}


def placed(graph, kind, gap):
    """The plan with l1 in place, then y put exactly `gap` bytes below m."""
    the_plan = memplan.plan(graph, tilings(graph), MEMORY, direct={"l1": kind})
    offs = the_plan["activations"]["offsets"]
    offs["y"], offs["m"] = 0, gap
    offs["x"] = gap + graph.tensor("m").nbytes
    the_plan["activations"]["arena"] = offs["x"] + graph.tensor("x").nbytes
    return the_plan


def test_pointwise_gap_by_hand():
    # 4x4 pixels, 8 -> 16 channels, four pixels a step: before step j the
    # output holds 4j pixels (64j bytes), step j reads from input byte 32j;
    # the gap is 64j - 1 - 32j + 1 = 32j, largest for the last step (j = 3)
    graph = graph3("pointwise", 4, 8, 1, 1, [0] * 4, 16)
    layer = graph.layer("l1")
    assert kind_of(layer, graph) == "pointwise"
    assert direct.gap(layer, graph, "pointwise") == 96
    # same channels: each step reads its pixels before writing them, in place
    graph = graph3("pointwise", 4, 8, 1, 1, [0] * 4, 8)
    assert direct.gap(graph.layer("l1"), graph, "pointwise") == 0


def test_conv_gap_is_one_row_by_hand():
    # 3x3, pad 1, 4x4x4: a step is four pixels, one output row; step j
    # reads input rows j-1..j+1 (from byte 16(j-1)) after rows 0..j-1 of
    # the output (16j bytes) were written: gap 16j - 1 - 16(j-1) + 1 = 16
    graph = graph3("conv2d", 4, 4, 3, 1, [1] * 4, 4)
    assert kind_of(graph.layer("l1"), graph) == "conv"
    assert direct.gap(graph.layer("l1"), graph, "conv") == 16


def test_depthwise_row_calls_keep_the_output_a_row_behind():
    # 3x3, pad 1, 6x6x8 (two groups of four channels). One call: group 0
    # writes every output row before group 1 reads input pixel 0's
    # channels 4..7 (byte 4): the gap is the last byte group 0 wrote (pixel
    # 35, channel 3: 35 * 8 + 3) - 4 + 1 = 280. Row by row, call r (r >= 1)
    # reads from input row r - 1 (48 bytes a row); when its group 1 reads
    # pixel 0 there (byte 48(r - 1) + 4), rows 0..r-1 and channels 0..3 of
    # row r are written (to byte 48r + 5 * 8 + 3): 48r + 43 - 48(r - 1) - 4 + 1
    graph = graph3("depthwise", 6, 8, 3, 1, [1] * 4, 8)
    layer = graph.layer("l1")
    assert kind_of(layer, graph) == "depthwise"
    assert direct.gap(layer, graph, "depthwise") == 280
    assert len(direct.bands(layer, graph, "depthwise_rows")) == 6
    assert direct.gap(layer, graph, "depthwise_rows") == 88


@settings(max_examples=30, deadline=None)
@given(op=st.sampled_from(["conv2d", "depthwise", "pointwise"]), hw=st.integers(3, 9), c=st.integers(1, 9),
       k=st.sampled_from([1, 3]), s=st.sampled_from([1, 2]), padded=st.booleans(), co=st.integers(1, 9),
       rows=st.booleans())
def test_the_replay_accepts_the_gap_and_names_one_byte_more(op, hw, c, k, s, padded, co, rows):
    pad = [k // 2] * 4 if padded else [0] * 4
    if op == "pointwise":
        k, s, pad = 1, 1, [0] * 4
    graph = graph3(op, hw, c, k, s, pad, co)
    kind = kind_of(graph.layer("l1"), graph)
    assert kind is not None
    if kind == "depthwise" and rows:
        kind = "depthwise_rows"
    gap = direct.gap(graph.layer("l1"), graph, kind)
    hazard.check(graph, tilings(graph), placed(graph, kind, gap))
    if gap == 0:
        return
    with pytest.raises(hazard.HazardError,
                       match=r"^layer l1 step \d+ \(in place\): reads tensor 'm' at L2 offset \d+ \(element "
                             r"\d+,\d+,\d+ of a .* tensor at \d+\), but it holds tensor 'y' .* written by step \d+"):
        hazard.check(graph, tilings(graph), placed(graph, kind, gap - 1))


def test_a_layer_in_place_apart_may_not_touch_its_input():
    """Pooling runs in place without a modelled order: any shared byte is caught."""
    tensors = {"x": Tensor("x", [4, 4, 8]), "m": Tensor("m", [4, 4, 8]), "y": Tensor("y", [2, 2, 8])}
    layers = [Layer("l0", "pointwise", ["x"], "m", input_offset=0, weights="l0.w", bias="l0.b", requant=rq(8)),
              Layer("l1", "maxpool", ["m"], "y", kernel=[2, 2], stride=[2, 2], pad=[0] * 4, input_offset=0)]
    graph = Graph("g", "test", tensors, layers, ["x"], ["y"])
    assert kind_of(graph.layer("l1"), graph) == "apart"
    assert direct.gap(graph.layer("l1"), graph, "apart") == graph.tensor("y").nbytes
    the_plan = placed(graph, "apart", graph.tensor("y").nbytes)
    hazard.check(graph, tilings(graph), the_plan)
    with pytest.raises(hazard.HazardError, match=r"^layer l1 \(in place\): its output 'y' at L2 offset 0 overlaps "
                                                 r"its input 'm' at 31 from offset 31 on"):
        hazard.check(graph, tilings(graph), placed(graph, "apart", graph.tensor("y").nbytes - 1))


def test_in_place_layers_take_only_their_scratch_in_the_tile_level():
    graph = graph3("conv2d", 8, 4, 3, 1, [1] * 4, 8)
    the_plan = memplan.plan(graph, tilings(graph), MEMORY, direct={"l1": "conv"})
    lay = the_plan["tiles"]["layers"]["l1"]
    # CMSIS-NN's multipliers and shifts (8 bytes x 8 channels) and four
    # int16 im2col columns of 36 taps: 64 + 4 * 36 * 2
    assert lay["total"] == 64 + 288 and the_plan["direct"] == {"l1": "conv"}
    assert memplan.layer_slice(the_plan, graph.layer("l1"))["direct"] == "conv"
    assert "direct" not in memplan.layer_slice(the_plan, graph.layer("l0"))


@pytest.mark.qemu
def test_layers_in_place_on_stm32f4_are_bit_exact_and_need_less_ram(tmp_path):
    """dscnn_kws on stm32f4 (flat SRAM: `direct: flat`): every layer runs in
    place, convolution and pointwise outputs over their consumed inputs, the
    depthwise layers in one call each (by rows, a call per row, the cost
    model prices them about twice as slow: rambudget.plan_flat); bit-exact
    under QEMU, and the total RAM is below the build with every layer
    through the tile arena (direct=0). With a RAM cap only the rows meet,
    the depthwise layers run by rows, bit-exact too."""
    from helpers import report, scons

    model = "dscnn_kws"
    scons("target=stm32f4", f"model={model}", out=tmp_path / "a", check=True)
    rep = report(tmp_path / "a", "stm32f4", model)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    the_plan = json.loads((tmp_path / "a" / "stm32f4" / model / "memplan.json").read_text())
    graph = json.loads((tmp_path / "a" / "stm32f4" / model / "graph.json").read_text())
    kinds = the_plan["direct"]
    assert {"conv", "pointwise", "depthwise", "apart"} <= set(kinds.values())
    scons("target=stm32f4", f"model={model}", "direct=0", out=tmp_path / "b", check=True)
    base = json.loads((tmp_path / "b" / "stm32f4" / model / "memplan.json").read_text())
    assert "direct" not in base
    ram = lambda p: sum(m["ram"] for m in memplan.memory_report(p).values() if "ram" in m)  # noqa: E731
    assert ram(the_plan) < ram(base)
    # a cap only the depthwise layers run by rows meet
    scons("target=stm32f4", f"model={model}", f"ram_cap={ram(the_plan) - 1}", out=tmp_path / "c", check=True)
    capped = json.loads((tmp_path / "c" / "stm32f4" / model / "memplan.json").read_text())
    assert ram(capped) < ram(the_plan)
    assert report(tmp_path / "c", "stm32f4", model)["verdict"] == "pass"
    # there the outputs follow their consumed inputs closely
    kinds, offs, sizes = capped["direct"], capped["activations"]["offsets"], {}
    for name, t in graph["tensors"].items():
        n = 1
        for d in t["shape"]:
            n *= d
        sizes[name] = n
    over = {layer["name"] for layer in graph["layers"] if layer["name"] in kinds and len(layer["inputs"]) == 1
            and offs[layer["output"]] < offs[layer["inputs"][0]] + sizes[layer["inputs"][0]]
            and offs[layer["inputs"][0]] < offs[layer["output"]] + sizes[layer["output"]]}
    assert "depthwise_rows" in {kinds[n] for n in over}


def test_a_ram_cap_on_a_faster_tile_level_takes_layers_in_place_before_smaller_tiles():
    """Policy "ram_cap" (stm32h7): no cap, no layer in place; a cap the full
    arena misses but the layers in place meet: in place, at the full budget
    (before any smaller arena)."""
    import os

    import yaml

    from tessera.planning import rambudget
    from tessera.tiler import solve_layer
    from tessera.config.views import tiler_layer

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "kernels", "cmsis_nn", "library.yaml")) as f:
        lib = yaml.safe_load(f)["tiler"]
    graph = graph3("depthwise", 16, 16, 3, 1, [1] * 4, 16)
    memory = {"levels": {"L1": {"size": 16384, "usable": 16384, "kind": "scratchpad", "writable": True},
                         "L2": {"size": 65536, "usable": 65536, "kind": "sram", "writable": True},
                         "flash": {"size": 1 << 20, "usable": 1 << 20, "kind": "flash", "writable": False}},
              "place": {"tiles": "L1", "activations": "L2", "weights": "flash"}, "align": 4, "overlap": True}
    memory["direct"] = {"policy": "ram_cap", "eligible": direct.eligible(graph, functions(graph))}
    assert set(memory["direct"]["eligible"]) == {"l0", "l1"}
    views = {layer.name: tiler_layer(layer, graph) for layer in graph.layers}
    tgt = {"l1_budget": 16384, "cores": 1, "buffering": 2, "kernels": lib}
    full = rambudget.choose(graph, views, tgt, memory, 1 << 30, solve_layer)
    assert full["l1_budget"] == 16384 and full["direct"] == []
    tilings = {n: dict(solve_layer(v, tgt), layer=n) for n, v in views.items()}
    in_place = rambudget.total_ram(memplan.memory_report(
        memplan.plan(graph, tilings, memory, direct=memory["direct"]["eligible"])))
    assert in_place < full["ram"]
    got = rambudget.choose(graph, views, tgt, memory, full["ram"] - 1, solve_layer)
    assert got["l1_budget"] == 16384 and got["direct"] == ["l0", "l1"] and got["ram"] == in_place
    assert got["tried"] == [[16384, full["ram"]], [16384, in_place, "in place"]]
    # here in place is the least RAM: a cap below it lists every try in one line
    from tessera.errors import TesseraError
    with pytest.raises(TesseraError) as err:
        rambudget.choose(graph, views, tgt, memory, in_place - 1, solve_layer, "ram_cap of g")
    msg = str(err.value)
    assert "\n" not in msg and f"16384: {in_place} (in place)" in msg and f"least is {in_place}" in msg


def test_no_layer_in_place_with_an_upstream_cmsis_nn_or_direct_0(tmp_path):
    """The modelled loop orders are this checkout's kernels': with ARM's own
    CMSIS-NN (cmsis_nn=<checkout>) or direct=0, every layer is tiled."""
    from helpers import scons

    checkout = tmp_path / "cmsis"
    for d in ("Source/ConvolutionFunctions", "Source/FullyConnectedFunctions", "Source/NNSupportFunctions",
              "Source/PoolingFunctions", "Include"):
        (checkout / d).mkdir(parents=True)
    plans = {}
    for name, extra in (("own", []), ("upstream", [f"cmsis_nn={checkout}"]), ("off", ["direct=0"])):
        plan = tmp_path / name / "stm32f4" / "tiny" / "memplan.json"
        scons("target=stm32f4", "model=tiny", *extra, str(plan), out=tmp_path / name, check=True)
        plans[name] = json.loads(plan.read_text())
    assert plans["own"]["direct"] and "direct" not in plans["upstream"] and "direct" not in plans["off"]
