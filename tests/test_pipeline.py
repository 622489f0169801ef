"""The build's decisions as plain functions (tessera.pipeline), without
SCons: which layers are cut in row bands or write storage-level tiles,
which run in place, which fused scheme a kernel library's steps are tiled
for, whether the selector is priced, the RAM cap, what a check compares.
End-to-end builds (test_build_host, test_direct, test_fusion_build,
test_out_of_core) show the same decisions in generated files."""

import os

import pytest

from helpers import ROOT, chain_graph
from tessera import config
from tessera.config import views
from tessera.errors import TesseraError
from tessera.ir import Requant
from tessera.pipeline import budget, check, codegen, fusion, model, on, on_if_given, options, plan, tiling


def target(name):
    return config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)


def rq(n):
    # CMSIS-NN's arithmetic (half-up rounding, no additive term): its own kernels run
    return Requant(mul=[1 << 20] * n, add=[0], shift=[24] * n)


def dw_pw_graph(hw=16, c=8):
    """x -> pointwise -> m -> depthwise 3x3 -> y: a layer pair some fusion
    candidate covers, and layers CMSIS-NN runs in place."""
    return chain_graph("depthwise", hw, c, 3, 1, [1] * 4, c, rq)


def given(**kw):
    return dict(options.DEFAULTS, **kw)


def test_switches_read_as_sconstruct_documents():
    assert on("1") and on("yes") and on("") and not on("0") and not on("no") and not on("false")
    assert not on_if_given("") and not on_if_given("0") and on_if_given("1")


def test_fusion_defaults_command_line_then_model_then_target():
    sd = target("stm32f746_sd")     # its YAML says fusion: none
    assert model.fusion_defaults(sd, {}) == {"fusion": "none", "fusion_cost": "model"}
    assert model.fusion_defaults(sd, {"fusion": "min_memory"})["fusion"] == "min_memory"
    assert model.fusion_defaults(target("host"), {}) == {"fusion": "min_latency", "fusion_cost": "model"}


def test_a_wrong_fusion_choice_is_one_line():
    t = os.path.join(ROOT, "targets", "host.yaml")
    m = os.path.join(ROOT, "models", "tiny.yaml")
    with pytest.raises(TesseraError, match=r"^fusion=fast: unknown fusion policy"):
        model.load("host", t, "tiny", m, fusion_policy="fast")
    with pytest.raises(TesseraError, match=r"^fusion_cost=guess: unknown fusion cost source"):
        model.load("host", t, "tiny", m, fusion_cost="guess")
    tcfg, mcfg = model.load("host", t, "tiny", m, fusion_policy="none")
    assert mcfg["fusion"] == "none" and mcfg["fusion_cost"] == "model"


def test_the_fit_hint_names_targets_that_hold_the_weights_external_memory_first():
    f4 = target("stm32f4")
    others = model.bundled_targets(ROOT)
    flash = f4["memory"]["flash"]
    room = flash["size"] - sum(flash["reserved"].values())    # what the code around the weights leaves
    for graph in (dw_pw_graph(), None):
        hint = model.fit_hint(f4, others, graph)
        assert hint.startswith(f"at most {room:,} B of weights fit stm32f4's flash")
    # a network with a 1.2 MB linear layer: only targets with room for it, external levels first
    big = dw_pw_graph()
    for layer in big.layers:
        layer.weights = None
    from tessera.ir import Layer, Tensor
    big.tensors["fc_out"] = Tensor("fc_out", [1, 1, 600])
    big.layers.append(Layer("fc", "linear", [big.layers[-1].output], "fc_out", input_offset=0, weights="fc.w",
                            bias=None, requant=big.layers[-1].requant))
    hint = model.fit_hint(f4, others, big)
    need = int(hint.split("that holds these ")[1].split(" B")[0].replace(",", ""))
    assert need > room
    named = hint.split("that holds")[1].split(": ", 1)[1].rstrip(")").split("), ")
    sizes = [int(n.split(": ")[1].split(" B")[0].replace(",", "")) for n in named]
    kinds = [n.rsplit(" ", 1)[1].rstrip(")") for n in named]
    assert all(s >= need for s in sizes) and "stm32h7" in hint and "stm32f4 " not in hint
    assert kinds == sorted(kinds, key=lambda k: k != "external") and kinds[0] == "external"


def test_row_bands_only_with_overlap():
    graph = dw_pw_graph()
    assert plan.row_bands(graph, False) == set()
    assert plan.row_bands(graph, True) <= {layer.name for layer in graph.layers}


def test_layer_views_ask_for_row_bands_and_storage_tiles():
    # 128x128x32 int8 tensors (512 KiB): more than stm32f746_sd's 320 kB of
    # SRAM, so they live on the card; the layers touching them are cut in
    # row bands and the one writing them gathers storage-level tiles
    graph = chain_graph("pointwise", 128, 32, 1, 1, [0] * 4, 32, rq)
    sd = target("stm32f746_sd")
    swapped = plan.memplan.predict_swapped(graph, views.memory_target(sd))
    assert swapped, "the test's tensors must not fit the SRAM"
    v = plan.layer_views(graph, sd, set())
    for layer in graph.layers:
        touches = swapped & set(layer.inputs + [layer.output])
        assert bool(v[layer.name].get("rows")) == bool(touches)
        assert ("storage_out" in v[layer.name]) == (layer.output in swapped)
    # without a storage level, only the named layers are cut in bands
    host = plan.layer_views(graph, target("host"), {"l1"})
    assert host["l1"].get("rows") == 1 and "rows" not in host["l0"] and "storage_out" not in host["l1"]


def test_in_place_policy_from_target_switch_and_upstream_checkout():
    f4, lib = target("stm32f4"), views.kernel_library("cmsis_nn")
    assert f4["direct"] == "flat"
    assert plan.direct_policy(f4, lib, True, False) == "flat"
    assert plan.direct_policy(f4, lib, False, False) == "none"       # direct=0
    assert plan.direct_policy(f4, lib, True, True) == "none"         # cmsis_nn=<path>: another checkout's loops
    assert plan.upstream_variable(lib) == "cmsis_nn" and plan.upstream_variable(views.kernel_library("reference")) is None
    assert plan.direct_policy(target("host"), views.kernel_library("reference"), True, False) == "none"
    assert options.variables(lib) == dict(options.DEFAULTS, cmsis_nn="")


def test_layers_in_place_where_the_plan_may_take_them():
    graph = dw_pw_graph()
    f4 = target("stm32f4")
    memory = plan.memory(graph, f4, views.kernel_library("cmsis_nn"), True, "flat", {"l1"}, "hint")
    # CMSIS-NN's own pointwise and depthwise kernels: both may run in place,
    # the depthwise cut in row bands calls once per row
    assert memory["direct"] == {"policy": "flat", "eligible": {"l0": "pointwise", "l1": "depthwise_rows"}}
    assert memory["overlap"] is True and memory["fit_hint"] == "hint" and "ram_cap" not in memory
    # a target that stages weights through L2 (gap8) runs no layer in place
    gap8 = plan.memory(graph, target("gap8"), views.kernel_library("pulp_nn"), True, "flat", set(), "")
    assert "staging" in gap8 and "direct" not in gap8
    capped = plan.memory(graph, f4, views.kernel_library("cmsis_nn"), True, "none", set(), "", 1000, "here")
    assert capped["ram_cap"] == 1000 and capped["where"] == "here" and "direct" not in capped


def test_the_fused_scheme_of_a_kernel_library():
    assert fusion.scheme(target("stm32h7"), {}) == {"dw_pw": "layers", "pw_dw": "layers"}
    assert fusion.scheme(target("gap8"), {}) == {"dw_pw": "shared", "pw_dw": "shared"}
    # pulp_open's cores have Xpulp: the fused tiler reserves the 3x3 depthwise's planes
    assert fusion.scheme(target("pulp_open"), {})["dw_pw_plane"] is True
    assert fusion.scheme(target("gap8"), {"fusion_pw_dw": "rows"})["pw_dw_layout"] == "rows"
    assert "pw_dw_layout" not in fusion.scheme(target("gap8"), {"fusion_pw_dw": "auto"})


def test_min_latency_without_coefficients_tiles_no_candidate():
    graph = dw_pw_graph()
    host = target("host")
    mcfg = {"fusion": "min_latency", "fusion_cost": "model"}
    unpriced = fusion.setup(graph, host, mcfg, None)
    assert unpriced["candidates"] and unpriced["solved"] == []
    priced = fusion.setup(graph, host, mcfg, {"ops": {}})
    assert priced["solved"] == [c for c in priced["candidates"] if c["ok"]] and priced["solved"]
    assert fusion.setup(graph, host, {"fusion": "none", "fusion_cost": "model"}, None)["candidates"] == []
    assert fusion.variants({"policy": "min_latency", "cost": {"source": "measured"}}) == ("none",) + \
        fusion.fusion.VARIANTS
    assert fusion.variants({"policy": "min_latency", "cost": {"source": "model"}}) == ()


def test_the_ram_cap_command_line_then_model_then_target():
    assert budget.cap("", {"ram_cap": 3}, {"ram_cap": 2}) == 2
    assert budget.cap("", {"ram_cap": 3}, {}) == 3
    assert budget.cap(" 1000 ", {"ram_cap": 3}, {"ram_cap": 2}) == 1000
    assert budget.cap("", {}, {}) is None
    for bad in ("0", "-5", "12k"):
        with pytest.raises(TesseraError, match=rf"^ram_cap={bad}: not a positive number of bytes"):
            budget.cap(bad, {}, {})


def test_a_budget_overrides_the_tile_level():
    tgt = tiling.with_budget({"l1_budget": 64000, "cores": 1}, {"x": 1}, {"l1_budget": 4096, "ram": 9})
    assert tgt == {"l1_budget": 4096, "cores": 1, "kernels": {"x": 1}}


def test_tile_cost_model_needs_coefficients():
    with pytest.raises(TesseraError, match=r"^tile_cost=model: no cost model coefficients for reference on host"):
        tiling.target(target("host"), views.kernel_library("reference"), "model")
    numbers, kernels = tiling.target(target("host"), views.kernel_library("reference"))
    assert "kernels" not in numbers and kernels == views.kernel_library("reference")["tiler"]


def test_a_fused_step_checks_its_last_layer_only():
    sched = {"steps": [{"step": "a", "kind": "layer", "layers": ["a"]},
                       {"step": "b+c+d", "kind": "dw_pw_add", "layers": ["b", "c", "d"]}]}
    assert check.inside(sched) == {"b": "b+c+d", "c": "b+c+d"}
    assert fusion.slices(sched, ["c", "b"]) == {"c": {"layer": "c", "step": "b+c+d", "kind": "dw_pw_add",
                                                     "first": False},
                                               "b": {"layer": "b", "step": "b+c+d", "kind": "dw_pw_add",
                                                     "first": True}}


def test_the_first_layer_of_candidates_reads_their_tilings_and_partners():
    solved = [{"layers": ["a", "b"]}, {"layers": ["a", "b", "c"]}, {"layers": ["b", "d"]}]
    assert codegen.group_inputs(solved) == {"a": {"tilings": [0, 1], "others": ["b", "c"]},
                                            "b": {"tilings": [2], "others": ["d"]}}


def test_tiles_in_the_activation_level_is_a_target_mistake():
    t = target("stm32h7")
    t = dict(t, place=dict(t["place"], tiles=t["place"]["activations"]))
    with pytest.raises(TesseraError, match=r"place\.tiles: .* is also place\.activations"):
        codegen.target(t, "m", dw_pw_graph())


def test_a_layer_view_gives_back_the_layer():
    graph = dw_pw_graph()
    v = codegen.layer_view(graph, graph.layers[1])
    layer, g = codegen.layer_from_view(v)
    assert layer == graph.layers[1] and v["index"] == 1
    assert set(g.tensors) == {"m", "y"} and g.tensor("y") == graph.tensor("y")


def test_channel_major_pairs_priced_for_the_tiler_and_the_plan():
    """On by default (chw=0 off): a pulp_nn pointwise -> 3x3 depthwise pair
    on an Xpulp target gets the depthwise's gain (core 0's cycles an output
    at its stride) and the DMA price, which the pair's two tiler views carry
    (tessera.cost.chw; docs/gvsoc.md, "Depthwise, session 11")."""
    from tessera.cost import chw

    assert on(options.DEFAULTS["chw"]) and not on("0")
    graph = dw_pw_graph(hw=32, c=64)
    po, lib = target("pulp_open"), views.kernel_library("pulp_nn")
    mem = plan.memory(graph, po, lib, True, "none", set(), "", chw_on=True)
    assert mem["chw_pairs"] == [["l0", "l1"]]
    price = mem["chw_price"]
    assert price["gain"] == {"l1": round(32 * 32 * 8 * lib["chw"]["gain_per_output"][1])}
    v = plan.chw_views(plan.layer_views(graph, po, set()), mem)
    assert v["l0"]["chw_out"] == v["l1"]["chw_in"] == dict(gain=price["gain"]["l1"], command=price["command"],
                                                            queue=price["queue"])
    # chw=0, a cap, or no Xpulp (gap8 on QEMU): no pairs, the views as they were
    for m in (plan.memory(graph, po, lib, True, "none", set(), "", chw_on=False),
              plan.memory(graph, po, lib, True, "none", set(), "", 10 ** 6, "here", chw_on=True),
              plan.memory(graph, target("gap8"), lib, True, "none", set(), "", chw_on=True)):
        assert "chw_pairs" not in m and plan.chw_views(v, m) is v
    # a box of whole rows is one command either way; a partial-width box is
    # one a channel, free up to the queue, then priced beyond the HWC box's
    shape = [32, 32, 64]
    assert chw.extra({"h": 4, "w": 32, "c": 64}, shape, 8, price) == 0
    assert chw.extra({"h": 4, "w": 8, "c": 40}, shape, 8, price) == 0
    assert chw.extra({"h": 4, "w": 8, "c": 64}, shape, 8, price) == 8 * (64 - 1) * price["command"]
    assert chw.extra({"h": 4, "w": 8, "c": 48}, shape, 8, price) == 8 * (48 - 4) * price["command"]
    # the tiler weighs it: the pointwise's tiles are whole rows or few channels
    numbers, kernels = tiling.target(po, lib)
    t = tiling.solve(v["l0"], tiling.with_budget(numbers, kernels))
    assert t["tile"]["w"] == 32 or t["tile"]["c"] <= price["queue"]


def conv_dw_graph(co=8, second_reader=False):
    """x [33, 33, 3] -> conv2d 3x3/2 -> m [16, 16, co] -> depthwise 3x3/1 ->
    y: a network's first convolution and its depthwise; with second_reader
    m also goes to a pool."""
    from tessera.ir import Graph, Layer, Tensor

    t = {"x": Tensor("x", [33, 33, 3]), "m": Tensor("m", [16, 16, co]), "y": Tensor("y", [16, 16, co])}
    layers = [Layer("c0", "conv2d", ["x"], "m", kernel=[3, 3], stride=[2, 2], pad=[0, 0, 1, 1], input_offset=0,
                    weights="c0.w", bias="c0.b", requant=rq(co)),
              Layer("d1", "depthwise", ["m"], "y", kernel=[3, 3], stride=[1, 1], pad=[1] * 4, input_offset=0,
                    weights="d1.w", bias="d1.b", requant=rq(co))]
    outputs = ["y"]
    if second_reader:
        t["z"] = Tensor("z", [16, 16, co])
        layers.append(Layer("p", "maxpool", ["m"], "z", kernel=[1, 1]))
        outputs.append("z")
    return Graph("g", "test", t, layers, ["x"], outputs)


def test_a_first_convolution_pairs_with_its_depthwise():
    """A pulp_nn convolution whose only reader is a 3x3 depthwise writes
    that tensor channel-major (pnn_conv2d_chw) where it pays, cut in
    whole-row bands of every channel (its boxes one DMA command; measured
    faster: docs/gvsoc.md, "First convolution channel-major"); channels not
    a multiple of 4, a second reader or a split reduction: no pair."""
    po, lib = target("pulp_open"), views.kernel_library("pulp_nn")
    graph = conv_dw_graph()
    mem = plan.memory(graph, po, lib, True, "none", set(), "", chw_on=True)
    assert mem["chw_pairs"] == [["c0", "d1"]]
    price = mem["chw_price"]
    v = plan.chw_views(plan.layer_views(graph, po, set()), mem)
    assert v["c0"]["chw_out"] == v["d1"]["chw_in"] and v["c0"]["rows"] == 1 and "rows" not in v["d1"]
    numbers, kernels = tiling.target(po, lib)
    tc = tiling.solve(v["c0"], tiling.with_budget(numbers, kernels))
    td = tiling.solve(v["d1"], tiling.with_budget(numbers, kernels))
    assert tc["tile"]["w"] == 16 and tc["tile"]["c"] == 8
    assert plan.chw_chosen(mem["chw_pairs"], None, {"c0": tc, "d1": td}, graph, price) == [["c0", "d1"]]
    # no DMA command free after a convolution (the pointwise pairs' queue
    # is): the depthwise's columns, a command a channel, do not pay
    assert v["d1"]["chw_in"]["queue"] == 0 < price["queue"]
    cols = dict(td, tile=dict(td["tile"], w=8), in_tile=dict(td["in_tile"], w=12))
    assert plan.chw_chosen(mem["chw_pairs"], None, {"c0": tc, "d1": cols}, graph, price) == []
    split = dict(tc, split={"n_chunks": 2})
    assert plan.chw_chosen(mem["chw_pairs"], None, {"c0": split, "d1": td}, graph, price) == []
    for bad in (conv_dw_graph(co=6), conv_dw_graph(second_reader=True)):
        assert plan.chw_pairs(bad, po) == []
    assert plan.chw_pairs(graph, target("gap8")) == []


def test_the_plan_takes_the_paying_pairs_the_activation_level_holds():
    """chw_fitting: the pairs not raising the peak first, then the others
    where the level holds them."""
    peaks = {(): 100, ("a",): 100, ("b",): 150, ("a", "b"): 150, ("c",): 100, ("a", "c"): 100}

    def plan_for(pairs, room):
        key = tuple(p[0] for p in pairs)
        if key not in peaks or peaks[key] > room:
            raise TesseraError("here", "does not fit", "fix")
        return {"activations": {"peak": peaks[key]}}
    a, b, c = ["a", "x"], ["b", "y"], ["c", "z"]
    assert plan.chw_fitting([b, a], lambda p: plan_for(p, 200)) == [a, b]
    assert plan.chw_fitting([b, a], lambda p: plan_for(p, 120)) == [a]
    assert plan.chw_fitting([a, b, c], lambda p: plan_for(p, 120)) == [a, c]
    assert plan.chw_fitting([], lambda p: plan_for(p, 0)) == []
