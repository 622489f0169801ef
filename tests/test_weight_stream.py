"""The memory plan's weight stream (tessera.memplan, targets whose weights
reach the tiles through the activation level, as GAP8's L3 -> L2 -> L1):
every layer's constants cut into chunks of whole L1 channel tiles, each
chunk placed in the room the activations leave, never over an activation
that is live while the chunk is, nor over the chunk it is live with."""

import pytest
from hypothesis import given, settings, strategies as st

from tessera.planning import memplan
from tessera.config import views
from tessera.errors import FitError
from tessera.ir import Graph, Layer, Requant, Tensor

ALIGN = 4


def chain(spec, hw=8, c_in=8):
    """A graph from [(op, out_channels), ...]: conv2d 3x3, pointwise,
    depthwise 3x3, avgpool (global), linear; per-channel requantization."""
    tensors = {"x": Tensor("x", [hw, hw, c_in])}
    layers, prev, c, h = [], "x", c_in, hw
    for i, (op, co) in enumerate(spec):
        name = f"l{i}"
        kernel, pad = [1, 1], [0, 0, 0, 0]
        if op in ("conv2d", "depthwise"):
            kernel, pad = [3, 3], [1, 1, 1, 1]
        if op == "depthwise":
            co = c
        if op == "avgpool":
            kernel, co = [h, h], c
        out_hw = 1 if op in ("avgpool", "linear") else h
        tensors[name] = Tensor(name, [out_hw, out_hw, co])
        rq = Requant(mul=[3] * co, add=[0], shift=[9] * co)
        weighted = op in ("conv2d", "pointwise", "depthwise", "linear")
        layers.append(Layer(name, op, [prev], name, kernel=kernel, pad=pad, input_offset=0,
                            weights=f"{name}.w" if weighted else None, bias=f"{name}.b" if weighted else None,
                            requant=Requant(mul=[3], add=[0], shift=[9]) if op == "avgpool" else rq))
        prev, c, h = name, co, out_hw
    return Graph("chain", "test", tensors, layers, ["x"], [prev])


def memory(l2_usable):
    """GAP8-like: tiles L1, activations L2, weights L3, no L3 <-> L1 engine."""
    return {"levels": {"L1": {"size": 64000, "usable": 64000, "kind": "scratchpad", "writable": True},
                       "L2": {"size": l2_usable, "usable": l2_usable, "kind": "sram", "writable": True},
                       "L3": {"size": 1 << 23, "usable": 1 << 23, "kind": "external", "writable": True}},
            "place": {"tiles": "L1", "activations": "L2", "weights": "L3"}, "staging": "L2"}


def tilings(graph, tile_c):
    """Stand-in tilings: channel tiles of tile_c (whole layers when larger)."""
    out = {}
    for layer in graph.layers:
        co = graph.tensor(layer.output).shape[2]
        tc = min(tile_c, co)
        out[layer.name] = {"layer": layer.name, "tile": {"h": 1, "w": 1, "c": tc}, "buffering": 2,
                           "n_inputs": len(layer.inputs), "l1_budget": 64000,
                           "l1_bytes": {"in": 16, "out": 16, "weights": 16, "params": 16, "scratch": 0,
                                        "total": 128}}
    return out


def live_activations(graph, plan, step):
    """(start, end) byte ranges of the activation level's buffers live at
    layer `step`: tensors (not the spilled ones) and bounce buffers."""
    producer, last = graph.producer(), graph.last_use()
    steps = {layer.name: i for i, layer in enumerate(graph.layers)}
    out = []
    for name, off in plan["activations"]["offsets"].items():
        if name in graph.tensors:
            start = producer.get(name, 0) if name not in graph.inputs else 0
            end, nbytes = last.get(name, start), graph.tensor(name).nbytes
        else:   # <layer>:bounce:<which>, live during its layer
            start = end = steps[name.split(":")[0]]
            nbytes = plan["activations"]["spill"]["bounces"][name]
        if start <= step <= end:
            out.append((off, off + -(-nbytes // ALIGN) * ALIGN))
    return out


def check_stream(graph, plan, usable):
    stream = plan["weights"]["stream"]
    chunks = stream["chunks"]
    steps = {layer.name: i for i, layer in enumerate(graph.layers)}
    # every weighted layer's channels, once, in order, in chunks of whole tiles
    for layer in graph.layers:
        if not (layer.weights or views.param_arrays(layer)):
            assert layer.name not in stream["layers"]
            continue
        mine = [c for c in chunks if c["layer"] == layer.name]
        co = graph.tensor(layer.output).shape[2]
        n = stream["layers"][layer.name]["chunk_c"]
        assert [c["c0"] for c in mine] == list(range(0, co, n))
        assert sum(c["n"] for c in mine) == co
        layout = stream["layers"][layer.name]["layout"]
        sizes = dict([("weights", memplan.ir.weight_bytes_per_cout(layer, graph))]
                     + [(name, size) for name, _, size in views.param_arrays(layer)])
        for c in mine:   # every array of the chunk inside the chunk's bytes
            assert all(layout[a] + c["n"] * sizes[a] <= c["bytes"] for a in layout)
            assert layout == memplan.chunk_layout(layer, graph, n)[0]
    # in network order of the layers
    assert [steps[c["layer"]] for c in chunks] == sorted(steps[c["layer"]] for c in chunks)
    for k, c in enumerate(chunks):
        lo, hi = c["at"], c["at"] + c["bytes"]
        assert lo % ALIGN == 0 and 0 <= lo and hi <= usable
        first = steps[chunks[k - 1]["layer"]] if k else steps[c["layer"]]
        for step in range(first, steps[c["layer"]] + 1):   # loaded during chunk k-1, used in its layer
            for a, b in live_activations(graph, plan, step):
                assert hi <= a or b <= lo, f"chunk {k} over a live activation at step {step}"
        if k:
            p = chunks[k - 1]
            assert hi <= p["at"] or p["at"] + p["bytes"] <= lo, f"chunks {k - 1} and {k} overlap"


def test_small_weights_one_chunk_per_layer():
    g = chain([("conv2d", 8), ("depthwise", 0), ("pointwise", 16), ("avgpool", 0), ("linear", 10)])
    plan = memplan.plan(g, tilings(g, 64), memory(100_000))
    stream = plan["weights"]["stream"]
    assert [c["layer"] for c in stream["chunks"]] == ["l0", "l1", "l2", "l4"]
    assert all(m["count"] == 1 for m in stream["layers"].values())
    check_stream(g, plan, 100_000)


def test_large_layer_is_cut_over_output_channels():
    # l1's 64 x 64 weights (+ params) cannot fit half the room: several chunks
    g = chain([("pointwise", 64), ("pointwise", 64), ("pointwise", 16)], hw=4)
    usable = 4 * 4 * 64 * 2 + 4096
    plan = memplan.plan(g, tilings(g, 8), memory(usable))
    mine = plan["weights"]["stream"]["layers"]["l1"]
    assert mine["count"] > 1 and mine["chunk_c"] % 8 == 0
    check_stream(g, plan, usable)


def test_no_room_names_the_layer():
    g = chain([("pointwise", 64), ("pointwise", 64)], hw=8)
    usable = 8 * 8 * 64 * 2 + 64   # the activations leave 64 bytes
    with pytest.raises(FitError) as err:
        memplan.plan(g, tilings(g, 16), memory(usable))
    msg = str(err.value)
    assert "layer l0" in msg and "channel tile" in msg and "memory.L2" in msg


def test_no_staging_no_stream():
    g = chain([("pointwise", 16)])
    mem = memory(100_000)
    del mem["staging"]
    mem["place"]["weights"] = "L2"
    assert "stream" not in memplan.plan(g, tilings(g, 16), mem)["weights"]


OPS = st.sampled_from(["conv2d", "pointwise", "depthwise", "pointwise"])


@st.composite
def networks(draw):
    spec = [(draw(OPS), draw(st.sampled_from([4, 8, 16, 24, 32, 64]))) for _ in range(draw(st.integers(1, 6)))]
    if draw(st.booleans()):
        spec += [("avgpool", 0), ("linear", draw(st.integers(1, 40)))]
    return spec, draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([1, 4, 8, 16, 64])), \
        draw(st.one_of(st.integers(0, 4000), st.integers(4000, 200000)))


@given(networks())
@settings(max_examples=150, deadline=None)
def test_chunks_never_overlap_live_data(net):
    spec, hw, tile_c, spare = net
    g = chain(spec, hw=hw)
    acts = memplan.plan(g, tilings(g, tile_c), memory(1 << 24))["activations"]["peak"]
    usable = acts + spare
    try:
        plan = memplan.plan(g, tilings(g, tile_c), memory(usable))
    except FitError as err:
        assert "channel tile" in str(err)   # too little room: said so, never a wrong plan
        return
    check_stream(g, plan, usable)


def test_activations_that_cannot_fit_move_to_the_spill_level():
    # 16x16x64 -> pointwise 16x16x96: input and output together exceed L2
    g = chain([("pointwise", 96), ("depthwise", 0), ("pointwise", 16)], hw=16, c_in=64)
    tiles = tilings(g, 16)
    big = 16 * 16 * 96
    usable = 16 * 16 * 64 + big - 4096
    with pytest.raises(FitError):
        memplan.plan(g, tiles, memory(usable))   # no spill level: it does not fit
    mem = dict(memory(usable), spill="L3")
    plan = memplan.plan(g, tiles, mem)
    spill = plan["activations"]["spill"]
    assert spill["level"] == "L3" and spill["bytes"] >= big
    moved = set(spill["offsets"])
    assert moved and not moved & set(g.inputs + g.outputs)
    assert not moved & set(plan["activations"]["offsets"])
    # the layers that touch a moved tensor pass tiles through a bounce buffer in L2
    for layer in g.layers:
        s = memplan.layer_slice(plan, layer)
        touched = [i for i, name in enumerate(layer.inputs) if name in moved]
        assert sorted(s.get("spill", {})) == sorted([f"in{i}" for i in touched]
                                                    + (["out"] if layer.output in moved else []))
        for which, where in s.get("spill", {}).items():
            assert where["at"] == spill["offsets"][layer.inputs[int(which[2:])] if which != "out" else layer.output]
            assert memplan.bounce_name(layer.name, which) in plan["activations"]["offsets"]
    report = memplan.memory_report(plan)
    assert report["L3"]["spilled_activations"] == spill["bytes"]
    check_stream(g, plan, usable)
