"""The build-time hazard checker (tessera.hazard): the generated schedule
replayed over the planned addresses catches a byte read after it was
overwritten, naming the layer, the tile and the address, and passes the
plans the schedule really is safe for."""

import copy

import pytest

from tessera.planning import hazard, memplan
from tessera.ir import Graph, Layer, Requant, Tensor

ROW = 8 * 8      # bytes of one input row: 8 columns of 8 int8 channels


def conv_graph(op="conv2d"):
    """x (8x8x8) -> 3x3 conv, pad 1 (or pointwise) -> y (8x8x8)."""
    kernel, pad = ([3, 3], [1, 1, 1, 1]) if op == "conv2d" else ([1, 1], [0, 0, 0, 0])
    tensors = {"x": Tensor("x", [8, 8, 8]), "y": Tensor("y", [8, 8, 8])}
    layer = Layer("l0", op, ["x"], "y", kernel=kernel, pad=pad, input_offset=0, weights="l0.w", bias="l0.b",
                  requant=Requant(mul=[3] * 8, add=[0], shift=[9] * 8))
    return Graph("g", "test", tensors, [layer], ["x"], ["y"])


def tilings(tile_h):
    """Row tiles of tile_h output rows, all columns and channels; double buffered."""
    return {"l0": {"layer": "l0", "tile": {"h": tile_h, "w": 8, "c": 8}, "buffering": 2, "n_inputs": 1,
                   "l1_budget": 64000, "l1_bytes": {"in": 4 * ROW, "out": 2 * ROW, "weights": 600,
                                                    "params": 64, "scratch": 0, "total": 2 * 7 * ROW + 1328}}}


MEMORY = {"levels": {"L1": {"size": 64000, "usable": 64000, "kind": "scratchpad", "writable": True},
                     "L2": {"size": 4096, "usable": 4096, "kind": "sram", "writable": True}},
          "place": {"tiles": "L1", "activations": "L2", "weights": "L2"}}


def overlapped(graph, tiling, x_at, y_at):
    """The planner's plan with the activations moved by hand."""
    the_plan = memplan.plan(graph, tiling, MEMORY)
    the_plan = copy.deepcopy(the_plan)
    the_plan["activations"]["offsets"] = {"x": x_at, "y": y_at}
    the_plan["activations"]["peak"] = the_plan["activations"]["arena"] = max(x_at, y_at) + 8 * ROW
    return the_plan


def test_planner_plans_pass():
    graph = conv_graph()
    the_plan = memplan.plan(graph, tilings(2), MEMORY)   # memplan runs the checker itself
    assert hazard.check(graph, tilings(2), the_plan) == 4


def test_output_one_row_below_input_is_safe():
    # tile i writes output rows 2i, 2i+1 over input rows 2i-1, 2i: the rows the
    # next tile starts reading at (2i+1, its upper halo) are still intact
    graph = conv_graph()
    hazard.check(graph, tilings(2), overlapped(graph, tilings(2), x_at=ROW, y_at=0))


def test_one_word_too_many_is_caught_naming_tile_and_address():
    graph = conv_graph()
    the_plan = overlapped(graph, tilings(2), x_at=ROW, y_at=4)
    with pytest.raises(hazard.HazardError) as err:
        hazard.check(graph, tilings(2), the_plan)
    msg = str(err.value)
    # tile 0 writes output rows 0-1, i.e. L2 bytes [4, 4 + 2 rows); tile 1 reads
    # input rows 1-4 from byte 64 + 64 = 128: the first clobbered byte is 128,
    # row 1 column 0 channel 0 of x
    assert msg.startswith("layer l0 tile 1: reads tensor 'x' at L2 offset 128 (element 1,0,0 of a 8x8x8 tensor at 64)")
    assert "it holds tensor 'y', written by layer l0 tile 0" in msg
    assert "\n" not in msg


def test_pointwise_in_place_is_safe_but_not_one_byte_ahead():
    graph = conv_graph("pointwise")
    hazard.check(graph, tilings(2), overlapped(graph, tilings(2), x_at=0, y_at=0))
    with pytest.raises(hazard.HazardError, match=r"layer l0 tile 1: reads tensor 'x' at L2 offset 128 "):
        hazard.check(graph, tilings(2), overlapped(graph, tilings(2), x_at=0, y_at=4))


def test_output_clobbering_an_input_read_later_is_caught():
    # a second reader of x after the layer: x must stay whole until then
    graph = conv_graph("pointwise")
    graph.tensors["z"] = Tensor("z", [8, 8, 8])
    graph.layers.append(Layer("l1", "add", ["x", "y"], "z", input_offset=0,
                              requant=Requant(mul=[3], add=[0], shift=[9])))
    graph.outputs[:] = ["z"]
    t = dict(tilings(2), l1=dict(tilings(8)["l0"], layer="l1", n_inputs=2))
    the_plan = memplan.plan(graph, t, MEMORY)
    the_plan["activations"]["offsets"]["y"] = the_plan["activations"]["offsets"]["x"]
    with pytest.raises(hazard.HazardError, match=r"^layer l1 tile 0: reads tensor 'x' .* written by layer l0 tile 0"):
        hazard.check(graph, t, the_plan)


def test_tile_buffers_overlapping_are_caught():
    # tile 1's input lands (prefetched) before tile 0 computes into out[0]
    graph = conv_graph()
    the_plan = memplan.plan(graph, tilings(2), MEMORY)
    lay = the_plan["tiles"]["layers"]["l0"]
    lay["in"][0][1] = lay["out"][0]
    at = lay["out"][0]
    with pytest.raises(hazard.HazardError, match=rf"^layer l0 tile 1: reads input 0 of tile 1 at L1 offset {at} "
                                                 rf"\(byte 0 of the 256-byte buffer at {at}\), but it holds output "
                                                 r"of tile 0, written by layer l0 tile 0"):
        hazard.check(graph, tilings(2), the_plan)


def test_write_back_still_reading_is_caught():
    # in[0] over out[0]: tile 0 computing in place would be fine, but tile 2's
    # input is prefetched into in[0] while tile 0's write-back may still be
    # reading out[0] (until the wait before tile 2 computes)
    graph = conv_graph()
    the_plan = memplan.plan(graph, tilings(2), MEMORY)
    lay = the_plan["tiles"]["layers"]["l0"]
    lay["in"][0][0] = lay["out"][0]
    with pytest.raises(hazard.HazardError, match=r"^layer l0 tile 0 \(write-back\): reads output of tile 0 .* "
                                                 r"holds input 0 of tile 2, written by layer l0 tile 2 \(load\)"):
        hazard.check(graph, tilings(2), the_plan)
