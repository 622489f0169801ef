"""Segment-level overlap (tessera.overlap and the allocator's bounded
overlap): the gap computed from the tile table is the smallest the replayed
schedule (tessera.hazard) accepts, and the allocator uses it."""

import os

import pytest
from hypothesis import given, settings, strategies as st

from helpers import ROOT, chain_graph
from tessera.planning import hazard, memplan, overlap
from tessera.planning.alloc import plan_level
from tessera.ir import Graph, Layer, Requant, Tensor

MEMORY = {"levels": {"L1": {"size": 1 << 20, "usable": 1 << 20, "kind": "scratchpad", "writable": True},
                     "L2": {"size": 1 << 20, "usable": 1 << 20, "kind": "sram", "writable": True}},
          "place": {"tiles": "L1", "activations": "L2", "weights": "L2"}}


def rq(n):
    return Requant(mul=[3] * n, add=[0], shift=[9] * n)


def graph3(op, hw, c, k, s, pad, co):
    """m is consumed by the layer under test, so it may be overlapped."""
    return chain_graph(op, hw, c, k, s, pad, co, rq)


def tilings(graph, th, tw, tc):
    out = {}
    for layer in graph.layers:
        y = graph.tensor(layer.output).shape
        out[layer.name] = {"layer": layer.name, "tiled": True, "buffering": 2, "n_inputs": 1,
                           "tile": {"h": min(th, y[0]), "w": min(tw, y[1]), "c": min(tc, y[2])},
                           "l1_budget": 1 << 20, "l1_bytes": {"in": 64, "out": 64, "weights": 64, "params": 64,
                                                              "scratch": 0, "total": 512}}
    return out


def placed(graph, t, gap):
    """The planner's plan, then y put exactly `gap` bytes below m."""
    the_plan = memplan.plan(graph, t, MEMORY)
    offs = the_plan["activations"]["offsets"]
    size = lambda n: graph.tensor(n).nbytes  # noqa: E731
    offs["y"] = 0
    offs["m"] = gap
    offs["x"] = gap + size("m")
    the_plan["activations"]["arena"] = offs["x"] + size("x")
    return the_plan


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(["conv2d", "depthwise", "pointwise"]), hw=st.integers(3, 9), c=st.integers(1, 6),
       k=st.sampled_from([1, 3]), s=st.sampled_from([1, 2]), padded=st.booleans(), co=st.integers(1, 6),
       th=st.integers(1, 4), tw=st.integers(1, 9), tc=st.integers(1, 6))
def test_gap_is_the_smallest_the_schedule_allows(op, hw, c, k, s, padded, co, th, tw, tc):
    pad = [k // 2] * 4 if padded else [0] * 4
    graph = graph3(op, hw, c, k, s, pad, co)
    t = tilings(graph, th, tw, tc)
    try:
        gap = overlap.safe_gap(graph.layers[1], graph, t["l1"])
    except Exception:   # a tile size the tiler would not offer (padding on an inner tile)
        return
    hazard.check(graph, t, placed(graph, t, gap))
    if gap > 0:
        # one byte less and some later tile reads a byte an earlier tile wrote
        with pytest.raises(hazard.HazardError, match=r"^layer l1 tile \d+: reads tensor 'm' .* written by layer l1"):
            hazard.check(graph, t, placed(graph, t, gap - 1))


def test_row_tiles_of_a_3x3_conv_overlap_all_but_one_row_and_a_pixel():
    # tile i writes rows 2i, 2i+1; tile i+1 reads from row 2i+1 (its halo):
    # the gap is one output row plus... exactly the last written byte minus the
    # first read byte, plus one: ((2i+2) * W * C) - ((2i+1) * W * C) = W * C
    graph = graph3("conv2d", 8, 4, 3, 1, [1, 1, 1, 1], 4)
    t = tilings(graph, 2, 8, 4)
    assert overlap.safe_gap(graph.layers[1], graph, t["l1"]) == 8 * 4


def test_one_tile_and_whole_layers_run_in_place():
    graph = graph3("depthwise", 8, 4, 3, 1, [1, 1, 1, 1], 4)
    t = tilings(graph, 8, 8, 4)
    assert overlap.safe_gap(graph.layers[1], graph, t["l1"]) == 0


def test_only_consumed_single_inputs_are_candidates():
    graph = graph3("pointwise", 8, 4, 1, 1, [0] * 4, 4)
    t = tilings(graph, 2, 8, 4)
    # x is the network's input: never; m is consumed by l1: yes
    assert [(p["below"], p["above"]) for p in overlap.candidates(graph, t)] == [("y", "m")]
    # a second reader of m after l1 keeps m whole
    graph.tensors["z"] = Tensor("z", [8, 8, 4])
    graph.layers.append(Layer("l2", "add", ["m", "y"], "z", input_offset=0,
                              requant=Requant(mul=[3], add=[0], shift=[9])))
    graph.outputs[:] = ["z"]
    assert overlap.candidates(graph, dict(t, l2=t["l1"])) == []


def chain_buffers():
    # a -> b -> c, each 1000 bytes; b may start 100 below a, c 100 below b
    return (["s0", "s1", "s2"],
            [{"name": "a", "size": 1000, "start": 0, "end": 1}, {"name": "b", "size": 1000, "start": 1, "end": 2},
             {"name": "c", "size": 1000, "start": 2, "end": 2}],
            [{"below": "b", "above": "a", "gap": 100}, {"below": "c", "above": "b", "gap": 100}])


def test_allocator_overlaps_below_the_tensor_bound():
    steps, bufs, pairs = chain_buffers()
    without = plan_level("L2", 4096, steps, bufs)
    assert without["peak"] == without["lower_bound"] == 2000
    plan = plan_level("L2", 4096, steps, bufs, overlaps=pairs)
    assert plan["lower_bound"] == 2000 and plan["overlap_bound"] == 1100
    # each step alone could do with 1100, but b must sit 100 below a and c
    # 100 below b (or above it all): c at 0, b at 100, a at 200 is the best
    assert plan["peak"] == 1200 and plan["optimal"]
    o = plan["offsets"]
    assert o["a"] - o["b"] >= 100 and o["b"] - o["c"] >= 100


def test_cp_sat_respects_gaps_with_a_bystander():
    # a bystander r lives through the chain (a residual): the greedy orders
    # may miss the best plan; whatever wins, every pair keeps its gap and r
    # stays clear of all
    steps, bufs, pairs = chain_buffers()
    bufs.append({"name": "r", "size": 300, "start": 0, "end": 2})
    plan = plan_level("L2", 4096, steps, bufs, overlaps=pairs)
    o = plan["offsets"]
    assert plan["peak"] == 1200 + 300 and plan["optimal"]
    for n in "abc":
        assert o["r"] >= o[n] + 1000 or o[n] >= o["r"] + 300
    assert o["a"] - o["b"] >= 100 or o["b"] >= o["a"] + 1000


@st.composite
def chains(draw):
    """A chain of layers (each output consumed by the next) with a few
    long-lived bystanders, and a random allowed gap per consumed pair."""
    n = draw(st.integers(2, 7))
    bufs = [{"name": f"t{i}", "size": draw(st.integers(1, 400)), "start": max(i - 1, 0), "end": i}
            for i in range(n)]
    for k in range(draw(st.integers(0, 2))):
        s = draw(st.integers(0, n - 1))
        bufs.append({"name": f"r{k}", "size": draw(st.integers(1, 200)), "start": s,
                     "end": draw(st.integers(s, n - 1))})
    pairs = [{"below": f"t{i}", "above": f"t{i - 1}", "gap": draw(st.integers(0, 400))}
             for i in range(2, n) if draw(st.booleans())]
    return [f"s{i}" for i in range(n)], bufs, pairs


@settings(max_examples=60, deadline=None)
@given(chains())
def test_bounded_overlap_plans_are_valid_and_never_worse(inst):
    steps, bufs, pairs = inst
    plain = plan_level("L2", 1 << 20, steps, bufs)
    plan = plan_level("L2", 1 << 20, steps, bufs, overlaps=pairs)   # check_plan runs inside
    assert plan["overlap_bound"] <= plan["peak"]
    assert plan["peak"] <= plain["peak"] or not plan["optimal"] or not plain["optimal"]
    o = plan["offsets"]
    size = {b["name"]: -(-b["size"] // 4) * 4 for b in bufs}
    live = {b["name"]: (b["start"], b["end"]) for b in bufs}
    gap = {(p["below"], p["above"]): -(-p["gap"] // 4) * 4 for p in pairs}
    names = sorted(o)
    for i, a in enumerate(names):     # an independent check of every co-live pair
        for b in names[i + 1:]:
            if live[a][0] > live[b][1] or live[b][0] > live[a][1]:
                continue
            lo, hi = (a, b) if o[a] <= o[b] else (b, a)
            need = min(gap.get((lo, hi), size[lo]), size[lo])
            assert o[hi] - o[lo] >= need or (o[lo] == o[hi] and gap.get((hi, lo)) == 0)


def test_a_model_that_fits_stm32f4_only_with_overlap(tmp_path):
    """Planned on the real target: at tensor level mbv1_025_136_c10's
    activations do not fit stm32f4's SRAM1 (a one-line fit error); with
    segment-level overlap they do, and the plan passes the hazard replay."""
    import json

    from helpers import one_error, scons

    from tessera import config

    model = "mbv1_025_136_c10"
    line = one_error(scons("target=stm32f4", f"model={model}", "overlap=0",
                           str(tmp_path / "a" / "stm32f4" / model / "memplan.json"), out=tmp_path / "a"))
    l2 = config.load_yaml(os.path.join(ROOT, "targets", "stm32f4.yaml"))["memory"]["L2"]
    graph = json.loads((tmp_path / "a" / "stm32f4" / model / "graph.json").read_text())
    # the reservations, and the network's per-layer counts (8 B a layer) beside the C runtime's data
    usable = l2["size"] - sum(l2["reserved"].values()) - 8 * len(graph["layers"])
    assert "L2" in line and "no plan can fit" in line and f"{usable} bytes available" in line
    plan = tmp_path / "b" / "stm32f4" / model / "memplan.json"
    scons("target=stm32f4", f"model={model}", str(plan), out=tmp_path / "b", check=True)
    acts = json.loads(plan.read_text())["activations"]
    assert acts["lower_bound"] > acts["usable"] >= acts["peak"]


def test_row_bands_are_asked_for_at_the_memory_peak_only():
    # x -> l0 -> m -> l1 -> n -> l2 (pool) -> p -> l3 -> y; whole tensors live:
    # 4352, 8192, 5120, 1088 bytes at the four steps; with every consumed
    # input overlapped at best (the smaller tensor inside the larger): 4352
    # (l0 reads the network's input: never overlapped), 4096, 4096, 1024.
    # Row bands where the whole tensors exceed that floor (4352), and never
    # for the input's reader
    shapes = {"x": [8, 8, 4], "m": [8, 8, 64], "n": [8, 8, 64], "p": [4, 4, 64], "y": [4, 4, 4]}
    tensors = {k: Tensor(k, v) for k, v in shapes.items()}
    pw = lambda name, i, o: Layer(name, "pointwise", [i], o, input_offset=0, weights=f"{name}.w",  # noqa: E731
                                  bias=f"{name}.b", requant=rq(shapes[o][2]))
    layers = [pw("l0", "x", "m"), pw("l1", "m", "n"),
              Layer("l2", "maxpool", ["n"], "p", kernel=[2, 2], stride=[2, 2], pad=[0] * 4, input_offset=0),
              pw("l3", "p", "y")]
    graph = Graph("g", "test", tensors, layers, ["x"], ["y"])
    assert overlap.row_band_layers(graph) == ["l1", "l2"]


def test_fused_step_overlaps_by_its_bands_and_the_replay_checks_them():
    """A fused DW->PW step (schedule.json's dw_pw): its output may start the
    band gap below its input; one byte closer and the replay names the band."""
    from tessera.tiles import geometry
    tensors = {"x": Tensor("x", [8, 8, 4]), "m": Tensor("m", [8, 8, 4]), "d": Tensor("d", [8, 8, 4]),
               "y": Tensor("y", [8, 8, 6]), "z": Tensor("z", [8, 8, 4])}
    layers = [Layer("l0", "pointwise", ["x"], "m", input_offset=0, weights="l0.w", bias="l0.b", requant=rq(4)),
              Layer("dw", "depthwise", ["m"], "d", kernel=[3, 3], stride=[1, 1], pad=[1] * 4, input_offset=0,
                    weights="dw.w", bias="dw.b", requant=rq(4)),
              Layer("pw", "pointwise", ["d"], "y", input_offset=0, weights="pw.w", bias="pw.b", requant=rq(6)),
              Layer("l3", "pointwise", ["y"], "z", input_offset=0, weights="l3.w", bias="l3.b", requant=rq(4))]
    graph = Graph("g", "test", tensors, layers, ["x"], ["z"])
    t = tilings(graph, 8, 8, 8)
    bands = [{"oh0": o0, "oh": o, "ih0": i0, "ih": i, "pad_t": pt, "pad_b": pb}
             for o0, o, i0, i, pt, pb in geometry.axis_tiles(8, 2, 8, 3, 1, 1, 1)]
    fused = {"dw+pw": {"layers": ["dw", "pw"], "l1_total": 512, "bands": bands}}
    # bands 0..j-1 wrote output rows up to 2j - 1 (48 bytes a row); band j
    # reads from input row 2j - 1 (32 bytes a row): gap_j = 96j - 1 - 32(2j - 1) + 1
    # = 32j + 32, largest for the last band, j = 3
    gap = overlap.band_gap([8, 8, 4], 1, [8, 8, 6], 1, bands)
    assert len(bands) == 4 and gap == 32 * 3 + 32
    assert overlap.fused_candidates(graph, fused) == [{"below": "y", "above": "m", "gap": gap}]
    the_plan = memplan.plan(graph, t, MEMORY, fused=fused)
    acts = the_plan["activations"]
    assert acts["overlaps"] >= 1 and acts["peak"] < graph.tensor("m").nbytes + graph.tensor("y").nbytes
    offs = acts["offsets"]
    offs["y"], offs["m"], offs["x"], offs["z"] = 0, gap, gap + 256, gap + 512
    acts["arena"] = gap + 768
    hazard.check(graph, t, the_plan, fused)
    offs["m"] = gap - 1
    with pytest.raises(hazard.HazardError, match=r"^fused step dw\+pw band \d+: reads tensor 'm' .* written by "
                                                 r"fused step dw\+pw band"):
        hazard.check(graph, t, the_plan, fused)


@pytest.mark.qemu
def test_the_stm32f4_model_that_needs_overlap_is_bit_exact(tmp_path):
    """The same model built and run under QEMU with overlap: every layer
    bit-exact, in a plan that tensor-level planning cannot fit."""
    from helpers import report, scons

    model = "mbv1_025_136_c10"
    scons("target=stm32f4", f"model={model}", out=tmp_path, check=True)
    rep = report(tmp_path, "stm32f4", model)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    l2 = rep["memory"]["L2"]
    assert l2["tensor_bound"] > l2["usable"] >= l2["peak"]


@pytest.mark.qemu
def test_mbv2_128_on_gap8_fits_l2_with_min_memory_fusion(tmp_path):
    """mbv2_128's 64x64x96 expansion (393,216 B) alone exceeds GAP8's usable
    L2 (378,880 B): apart, it goes to L3. fusion=min_memory fuses just that
    expansion with its depthwise (the intermediate lives in L1 only), and
    with segment overlap the plan keeps every tensor in L2, at most 0.70x
    the network's tensor-level bound (b2_dw's 64x64x96 input and 32x32x96
    output), bit-exact under QEMU. patch=0: this is the single-layer
    planner's answer (with patched steps, min_memory runs whole chains patch
    by patch instead: tests/test_patch_build.py, docs/patches.md)."""
    import json

    from helpers import report, scons

    scons("target=gap8", "model=mbv2_128", "fusion=min_memory", "patch=0", out=tmp_path, check=True)
    net = tmp_path / "gap8" / "mbv2_128"
    steps = json.loads((net / "schedule.json").read_text())["steps"]
    assert [s["step"] for s in steps if s["kind"] != "layer"] == ["b2_expand+b2_dw"]
    acts = json.loads((net / "memplan.json").read_text())["activations"]
    assert "spill" not in acts
    assert acts["peak"] <= 0.70 * (64 * 64 * 96 + 32 * 32 * 96)
    rep = report(tmp_path, "gap8", "mbv2_128")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
