"""Which patched steps the selector takes (tessera.fusion.patch): the chains
a graph offers, the path under an activation need (msf-CNN's constrained
shortest path over the layer chain), none without a need, the least need
min_memory reaches, and what the schedule records."""

import pytest

from tessera.config import views
from tessera.fusion import decide, patch
from tessera.ir import Graph, Layer, Requant, Tensor
from tessera.tiler import solve_layer

KERNELS = views.kernel_library("reference")["tiler"]
TILER = {"l1_budget": 64000, "cores": 1, "buffering": 2, "kernels": KERNELS}
CTX = {"tiler": TILER, "direct": False, "coefficients": None, "dims": 2, "unit": "qemu-instructions",
       "overlap": True}


def _rq(c):
    return Requant(mul=[1 << 20] * c, add=[0], shift=[24] * c)


def mbv2_like(hw=32):
    """conv 3x3 s2 -> [expand x6, dw 3x3, project] -> [expand, dw, project,
    add] -> pool: a MobileNetV2 stem, its large tensors in the first block."""
    c = 8
    h = hw // 2
    t = {"x": Tensor("x", [hw, hw, 3]), "c0": Tensor("c0", [h, h, c])}
    layers = [Layer("conv0", "conv2d", ["x"], "c0", kernel=[3, 3], stride=[2, 2], pad=[1, 1, 1, 1],
                    input_offset=0, weights="w0", bias="b0", requant=_rq(c))]
    x = "c0"
    for b in (1, 2):
        e, d, p = f"e{b}", f"d{b}", f"p{b}"
        t[e], t[d], t[p] = Tensor(e, [h, h, 6 * c]), Tensor(d, [h, h, 6 * c]), Tensor(p, [h, h, c])
        layers += [Layer(f"b{b}_expand", "pointwise", [x], e, input_offset=0, weights=f"we{b}", bias=f"be{b}",
                         requant=_rq(6 * c)),
                   Layer(f"b{b}_dw", "depthwise", [e], d, kernel=[3, 3], pad=[1, 1, 1, 1], input_offset=0,
                         weights=f"wd{b}", bias=f"bd{b}", requant=_rq(6 * c)),
                   Layer(f"b{b}_project", "pointwise", [d], p, input_offset=0, weights=f"wp{b}", bias=f"bp{b}",
                         requant=_rq(c))]
        if b == 2:
            t["a2"] = Tensor("a2", [h, h, c])
            layers.append(Layer("b2_add", "add", [x, p], "a2", in_mul=[1, 1], in_offset=[0, 0], requant=_rq(1)))
            p = "a2"
        x = p
    t["y"] = Tensor("y", [1, 1, c])
    layers.append(Layer("pool", "avgpool", [x], "y", kernel=[h, h], stride=[h, h], input_offset=0,
                        requant=Requant(mul=[1], add=[0], shift=[8])))
    return Graph("g", "test", t, layers, ["x"], ["y"])


def _tilings(graph):
    return {layer.name: dict(solve_layer(views.tiler_layer(layer, graph), dict(TILER)), layer=layer.name)
            for layer in graph.layers}


def _steps(graph):
    return [{"step": layer.name, "kind": "layer", "layers": [layer.name]} for layer in graph.layers]


def test_chains_stop_where_a_tensor_is_read_outside():
    g = mbv2_like()
    chains = {patch.group_name(c) for c in patch.chains(g)}
    # the second block with its add (its input is the chain's input), and the stem into it
    assert {"b2_expand..b2_add", "conv0..b2_add", "b1_expand..b1_project", "conv0..b1_dw"} <= chains
    # not up to the second block's projection: p2 is read by the add, outside
    assert "b2_expand..b2_project" in chains and "b1_project..b2_dw" not in chains
    assert patch.form(g, ["b2_expand", "b2_dw", "b2_project", "b2_add"]) == "inverted bottleneck"
    assert patch.form(g, ["conv0", "b1_expand", "b1_dw"]) == "stages"


def test_no_need_no_patch_and_a_need_patches_only_the_hot_steps():
    g = mbv2_like()
    tilings = _tilings(g)
    steps, _ = patch.plan(g, _steps(g), tilings, float("inf"), CTX)
    assert all(s["kind"] == "layer" for s in steps)
    # below every block step's floor (a 16x16x48 expansion alone is 12288 B)
    need = 10000
    steps, record = patch.plan(g, _steps(g), tilings, need, CTX)
    patched = [s for s in steps if s["kind"] == "patch"]
    assert patched and all(s["footprint"] <= need for s in patched)
    covered = {n for s in patched for n in s["layers"]}
    assert {"b1_expand", "b1_dw", "b2_expand", "b2_dw"} <= covered
    # every step of the path in order, each layer once
    assert [n for s in steps for n in s["layers"]] == [layer.name for layer in g.layers]
    # an option recorded with its tile, policy, tile-level bytes, and what it beat
    p = patched[0]["patch"]
    assert p["l1_bytes"]["total"] <= TILER["l1_budget"] and p["policy"] in ("recompute", "cache")
    assert patched[0]["alternatives"] and patched[0]["reason"].startswith("its layers apart keep")
    # a need below the network's input and output can be met by nothing
    assert patch.plan(g, _steps(g), tilings, 100, CTX)[0] is None


def test_min_memory_reaches_the_least_need_and_the_schedule_says_so():
    g = mbv2_like()
    tilings = _tilings(g)
    sched = {"policy": "min_memory", "steps": _steps(g), "candidates": [],
             "totals": {"activation_transfer_bytes": 0, "unfused_activation_transfer_bytes": 1, "saved_bytes": 0,
                        "saved_permille": 0}}
    out = decide.with_patches(g, tilings, sched, CTX)
    assert out["patched"]["fits"] and out["patched"]["steps"]
    need = out["patched"]["need"]
    # the least: the network's input with the stem's output beside it, at most
    assert need <= 32 * 32 * 3 + 16 * 16 * 8 + 16 * 16 * 8
    assert patch.plan(g, _steps(g), tilings, need - 1, CTX)[0] is None
    assert all(s["footprint"] <= need for s in out["steps"] if s["kind"] == "patch")


@pytest.mark.parametrize("budget", [6000, 64000])
def test_options_fit_the_tile_level_and_cheapest_first(budget):
    g = mbv2_like()
    p = patch.Patcher(g, dict(CTX, tiler=dict(TILER, l1_budget=budget)))
    opts = p.options(["conv0", "b1_expand", "b1_dw", "b1_project"])
    assert opts and all(o["l1_bytes"]["total"] <= budget for o in opts)
    assert [o["cost"] for o in opts] == sorted(o["cost"] for o in opts)
    apart = 16 * 16 * 8 * 27 + 16 * 16 * 48 * 8 + 16 * 16 * 48 * 9 + 16 * 16 * 8 * 48
    # halos recomputed cost MACs; cached along the rows of a full-width strip, none
    assert all(o["macs"] >= apart for o in opts)
    assert any(o["macs"] > apart for o in opts if o["policy"] == "recompute" and o["patches"] > 1)
    if budget == 64000:
        cached = [o for o in opts if o["policy"] == "cache" and o["tile"][1] == 16]
        assert cached and all(o["macs"] == apart for o in cached)
