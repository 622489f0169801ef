"""Segment overlap of fused PW->DW steps (vMCU's multi-layer case) and the
build-time replay of fused steps and of the weight stream: the planner's
plans pass, a hand-made plan with one overlap too many is caught naming the
band and the address, and so is a weight chunk loaded over a fused step's
unread input (gap8 mbv1_025_128's dw3 mismatch, session 3)."""

import copy

import pytest

from tessera.planning import hazard, memplan
from tessera.ir import Graph, Layer, Requant, Tensor

XROW = 8 * 4      # bytes of one row of x: 8 columns of 4 int8 channels
YROW = 8 * 16     # of y: 8 columns of 16 channels


def _rq(c):
    return Requant(mul=[3] * c, add=[0], shift=[9] * c)


def bottleneck():
    """a (8x8x4) -> l0 pointwise -> x (8x8x4) -> [pw (expand to 16) -> m ->
    dw 3x3 pad 1] -> y (8x8x16) -> l3 pointwise -> z (8x8x4)."""
    tensors = {"a": Tensor("a", [8, 8, 4]), "x": Tensor("x", [8, 8, 4]), "m": Tensor("m", [8, 8, 16]),
               "y": Tensor("y", [8, 8, 16]), "z": Tensor("z", [8, 8, 4])}
    one, none = dict(kernel=[1, 1], pad=[0, 0, 0, 0]), dict(input_offset=0)
    layers = [Layer("l0", "pointwise", ["a"], "x", weights="l0.w", bias="l0.b", requant=_rq(4), **one, **none),
              Layer("pw", "pointwise", ["x"], "m", weights="pw.w", bias="pw.b", requant=_rq(16), **one, **none),
              Layer("dw", "depthwise", ["m"], "y", kernel=[3, 3], pad=[1, 1, 1, 1], weights="dw.w", bias="dw.b",
                    requant=_rq(16), **none),
              Layer("l3", "pointwise", ["y"], "z", weights="l3.w", bias="l3.b", requant=_rq(4), **one, **none)]
    return Graph("g", "test", tensors, layers, ["a"], ["z"])


def whole(name, c_out, c_in):
    """One tile (the whole 8x8 map), single buffered."""
    return {"layer": name, "tile": {"h": 8, "w": 8, "c": c_out}, "buffering": 1, "n_inputs": 1, "l1_budget": 64000,
            "l1_bytes": {"in": 64 * c_in, "out": 64 * c_out, "weights": c_out * c_in, "params": 8 * c_out,
                         "scratch": 0, "total": 64 * (c_in + c_out) + c_out * (c_in + 8)}}


TILINGS = {"l0": whole("l0", 4, 4), "pw": whole("pw", 16, 4), "dw": whole("dw", 16, 16), "l3": whole("l3", 4, 16)}

# bands of 2 output rows of the depthwise (3x3, pad 1): input rows with the halo,
# borders clipped
BANDS = [{"oh0": 0, "oh": 2, "ih0": 0, "ih": 3, "pad_t": 1, "pad_b": 0},
         {"oh0": 2, "oh": 2, "ih0": 1, "ih": 4, "pad_t": 0, "pad_b": 0},
         {"oh0": 4, "oh": 2, "ih0": 3, "ih": 4, "pad_t": 0, "pad_b": 0},
         {"oh0": 6, "oh": 2, "ih0": 5, "ih": 3, "pad_t": 0, "pad_b": 1}]
FUSED = {"pw+dw": {"layers": ["pw", "dw"], "l1_total": 4096, "bands": BANDS}}

# band j reads x from row ih0_j on after bands 0..j-1 wrote y rows 0..2j-1:
# y may start 2j * YROW - ih0_j * XROW - 1 bytes below x plus one, at most
# 3 * 2 * 128 - 5 * 32 = 608 (band 3)
GAP = 608

MEMORY = {"levels": {"L1": {"size": 64000, "usable": 64000, "kind": "scratchpad", "writable": True},
                     "L2": {"size": 8192, "usable": 8192, "kind": "sram", "writable": True}},
          "place": {"tiles": "L1", "activations": "L2", "weights": "L2"}}

# GAP8's shape: weights in L3, streamed through L2 in chunks
STREAMED = {"levels": dict(MEMORY["levels"], L3={"size": 1 << 20, "usable": 1 << 20, "kind": "dram",
                                                 "writable": True}),
            "place": {"tiles": "L1", "activations": "L2", "weights": "L3"}, "staging": "L2"}


def moved(the_plan, x_at, y_at):
    the_plan = copy.deepcopy(the_plan)
    the_plan["activations"]["offsets"].update(x=x_at, y=y_at)
    the_plan["activations"]["peak"] = the_plan["activations"]["arena"] = 4096
    return the_plan


def test_planner_overlaps_the_fused_step_output_with_its_input():
    graph = bottleneck()
    the_plan = memplan.plan(graph, TILINGS, MEMORY, fused=FUSED)    # replayed inside
    off = the_plan["activations"]["offsets"]
    assert "m" not in off                       # the intermediate lives in L1 only
    # at the fused step x (256 B) and y (1024 B) overlap as far as the bands
    # allow: x ends inside y (608 + 256 < 1024), so the step costs y alone
    # where whole tensors would take 1024 + 256 (and z lies on y: one tile)
    assert off["x"] - off["y"] == GAP
    assert the_plan["activations"]["peak"] == 1024


def test_one_overlap_too_many_is_caught_naming_band_and_address():
    graph = bottleneck()
    the_plan = memplan.plan(graph, TILINGS, MEMORY, fused=FUSED)
    hazard.check(graph, TILINGS, moved(the_plan, x_at=2048 + GAP, y_at=2048), FUSED)
    with pytest.raises(hazard.HazardError) as err:
        hazard.check(graph, TILINGS, moved(the_plan, x_at=2048 + GAP - 4, y_at=2048), FUSED)
    # band 3 reads x from row 5: L2 byte 2048 + 604 + 5 * 32 = 2812, which
    # band 2's y rows 4-5 (up to byte 2048 + 6 * 128 - 1 = 2815) overwrote
    msg = str(err.value)
    assert msg.startswith("fused step pw+dw band 3: reads tensor 'x' at L2 offset 2812 "
                          "(element 5,0,0 of a 8x8x4 tensor at 2652), but it holds tensor 'y', "
                          "written by fused step pw+dw band 2"), msg
    assert "\n" not in msg


def test_streamed_weights_are_placed_and_replayed_with_the_fused_step():
    graph = bottleneck()
    the_plan = memplan.plan(graph, TILINGS, STREAMED, fused=FUSED)
    stream = the_plan["weights"]["stream"]
    assert [c["layer"] for c in stream["chunks"]] == ["l0", "pw", "dw", "l3"]
    # the fused step asks for pw's and dw's chunks in pw's function: l3's
    # chunk starts loading there, while x is still read
    assert [c["step"] for c in stream["chunks"]] == [0, 1, 1, 3]
    off, l3 = the_plan["activations"]["offsets"], stream["chunks"][3]
    assert l3["at"] >= off["x"] + 256 or l3["at"] + l3["bytes"] <= off["x"]


def test_a_chunk_loaded_over_the_fused_step_input_is_caught():
    graph = bottleneck()
    the_plan = copy.deepcopy(memplan.plan(graph, TILINGS, STREAMED, fused=FUSED))
    x_at = the_plan["activations"]["offsets"]["x"]
    the_plan["weights"]["stream"]["chunks"][3]["at"] = x_at      # l3's chunk over x
    with pytest.raises(hazard.HazardError) as err:
        hazard.check(graph, TILINGS, the_plan, FUSED)
    assert str(err.value).startswith(
        f"fused step pw+dw band 0: reads tensor 'x' at L2 offset {x_at} (element 0,0,0 of a 8x8x4 tensor at "
        f"{x_at}), but it holds weight chunk 3 (l3 channels 0+), written by the weight stream, asked by fused "
        "step pw+dw"), str(err.value)


def test_a_chunk_overwritten_before_its_layer_copies_it_is_caught():
    graph = bottleneck()
    the_plan = copy.deepcopy(memplan.plan(graph, TILINGS, STREAMED, fused=FUSED))
    y_at = the_plan["activations"]["offsets"]["y"]
    the_plan["weights"]["stream"]["chunks"][3]["at"] = y_at      # l3's chunk under y, which the step writes
    with pytest.raises(hazard.HazardError, match=r"^layer l3 tile 0: reads weight chunk 3 \(l3 channels 0\+\) at "
                                                 rf"L2 offset {y_at} .* it holds tensor 'y', written by fused "
                                                 r"step pw\+dw band 0"):
        hazard.check(graph, TILINGS, the_plan, FUSED)



def test_a_fused_steps_tensors_never_move_to_a_slower_level():
    """A fused step has no bounce buffers (its kernel reads and writes its
    input and output in place), so when the activation level is too small
    the planner moves another tensor to L3, never one a fused step touches
    (`keep`); with none left it is a fit error (a fused step's output moved
    to the card used to fail later with a KeyError)."""
    graph = bottleneck()
    plan = memplan._activation_plan
    assert plan(graph, "L2", 1400, None, "L3", overlap=False)[2] == ["y"]          # the largest at the peak
    assert plan(graph, "L2", 1400, None, "L3", overlap=False, keep={"y"})[2] == ["m"]
    with pytest.raises(memplan.FitError):
        plan(graph, "L2", 1400, None, "L3", overlap=False, keep={"m", "y"})
    # memplan.plan keeps the fused steps' inputs and outputs
    assert memplan._fused_tensors(graph, FUSED) == {"x", "y"}
