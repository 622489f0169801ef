"""Unit tests of tessera.tiler: API, errors, determinism, real shapes.

Run with -s to see the tiles chosen for MobileNetV1 layers.
"""

import copy
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from tessera.util import canon
from tessera.errors import ConfigError, FitError
from tessera.tiler import TILER_VERSION, solve_layer, tiles
from tessera.tiles import geometry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB_PATH = os.path.join(ROOT, "kernels", "reference", "library.yaml")
with open(LIB_PATH) as f:
    REF = yaml.safe_load(f)["tiler"]


def layer(name, op, i, o, k=(1, 1), s=(1, 1), p=(0, 0, 0, 0), out_bytes=1, params=9):
    C = i[2]
    wpc = {"conv2d": k[0] * k[1] * C, "pointwise": k[0] * k[1] * C,
           "depthwise": k[0] * k[1], "linear": i[0] * i[1] * C}.get(op, 0)
    return {"name": name, "op": op, "in": list(i), "out": list(o), "kernel": list(k),
            "stride": list(s), "pad": list(p), "in_bytes": 1, "out_bytes": out_bytes,
            "n_inputs": 2 if op == "add" else 1, "w_bytes_per_cout": wpc,
            "param_bytes_per_cout": 0 if op in ("add", "maxpool", "avgpool") else params}


def target(budget, cores=8, kernels=REF):
    return {"l1_budget": budget, "cores": cores, "buffering": 2, "kernels": kernels}


CONV1 = layer("conv1", "conv2d", [128, 128, 3], [64, 64, 32], (3, 3), (2, 2), (1, 1, 1, 1))


def test_api_and_result_shape():
    assert isinstance(TILER_VERSION, str) and TILER_VERSION
    r = solve_layer(CONV1, target(64000))
    assert set(r) == {"layer", "tiled", "tile", "in_tile", "n_tiles", "buffering",
                      "n_inputs", "l1_bytes", "l1_budget", "optimal", "objective"}
    assert set(r["l1_bytes"]) == {"in", "out", "weights", "params", "scratch", "total"}
    assert r["layer"] == "conv1" and r["tiled"] and r["buffering"] == 2
    assert r["l1_budget"] == 64000 and r["l1_bytes"]["total"] <= 64000
    assert isinstance(r["objective"], int) and r["optimal"] is True
    # canonical JSON round trip: plain types only
    assert canon.dumps(r) == canon.dumps(json.loads(canon.dumps(r)))
    # the reference im2col: 2 pixels x 3x3x3 patch per core
    assert r["l1_bytes"]["scratch"] == 2 * 8 * 27


def test_strided_conv_first_row_tile_padding():
    """3x3 stride 2 pad 1: the first row tile is padded on top and reads
    input rows from 0; inner tiles start at row oh0*2 - 1."""
    r = solve_layer(CONV1, target(20000))
    tl = list(tiles(CONV1, r))
    first = tl[0]
    assert first["oh0"] == 0 and first["pad"][0] == 1 and first["ih0"] == 0
    assert first["pad"][1] == 1 and first["iw0"] == 0
    assert first["ih"] == (first["oh"] - 1) * 2 + 3 - 1
    inner = [t for t in tl if t["oh0"] > 0]
    assert inner and all(t["pad"][0] == 0 and t["ih0"] == t["oh0"] * 2 - 1 for t in inner)
    # the last output row (63) reads rows 125..127: no bottom padding needed
    last = tl[-1]
    assert last["pad"][2] == 0 and last["ih0"] + last["ih"] == 128


def test_whole_layer_fits_untiled():
    lay = layer("small", "depthwise", [8, 8, 16], [8, 8, 16], (3, 3), (1, 1), (1, 1, 1, 1))
    r = solve_layer(lay, target(64000))
    assert r["tiled"] is False and r["buffering"] == 1 and r["optimal"] is True
    assert r["tile"] == {"h": 8, "w": 8, "c": 16}
    assert r["n_tiles"] == {"h": 1, "w": 1, "c": 1}
    (t,) = tiles(lay, r)
    assert (t["ih0"], t["ih"], t["iw0"], t["iw"], t["ic0"], t["ic"]) == (0, 8, 0, 8, 0, 16)
    assert t["pad"] == [1, 1, 1, 1]
    whole = 8 * 8 * 16 * 2 + 16 * (9 + 9) + 8 * 9
    assert r["l1_bytes"]["total"] == whole
    # one byte less and it must be tiled, double buffered
    r2 = solve_layer(lay, target(whole - 1))
    assert r2["tiled"] is True and r2["buffering"] == 2


def test_unfit_layer_raises_fit_error_with_bytes():
    # conv2d needs all 512 input channels per tile: 1x1 pixel x 512 x 3x3
    lay = layer("conv_big", "conv2d", [8, 8, 512], [8, 8, 64], (3, 3), (1, 1), (1, 1, 1, 1))
    # in 3x3x512, out 1 (4 aligned), weights 9*512, params 9 (12 aligned),
    # double buffered, plus im2col 2 pixels x 3x3x512 x 8 cores
    need = 2 * (3 * 3 * 512 + 4 + 9 * 512 + 12) + 2 * 8 * 9 * 512
    # 60 bytes do not hold even one input channel's step (84): the error names
    # the unsplit tile's bytes
    with pytest.raises(FitError) as e:
        solve_layer(lay, target(60))
    msg = str(e.value)
    assert msg.startswith("layer conv_big:")
    assert f"needs {need} bytes of L1 but only 60 are available" in msg
    assert "512 input channels" in msg and "L1" in e.value.fix
    assert "\n" not in msg
    # exactly the bytes needed fit, with the smallest tile
    r = solve_layer(lay, target(need))
    assert r["tile"] == {"h": 1, "w": 1, "c": 1} and r["l1_bytes"]["total"] == need


def test_split_reduction_when_one_output_does_not_fit():
    """An output whose reduction does not fit is computed in chunks of
    input channels, its int32 partial sums counted once; a layer that fits
    unsplit is never split."""
    lay = layer("conv_big", "conv2d", [8, 8, 512], [8, 8, 64], (3, 3), (1, 1), (1, 1, 1, 1))
    r = solve_layer(lay, target(20000))
    k, n = r["split"]["k"], r["split"]["n"]
    assert 1 <= k < 512 and n == -(-512 // k) and r["l1_bytes"]["total"] <= 20000
    t = r["tile"]
    assert r["l1_bytes"]["acc"] == 4 * t["h"] * t["w"] * t["c"]
    fc = layer("fc", "linear", [1, 1, 4096], [1, 1, 16])
    r = solve_layer(fc, target(16000))
    assert r["split"]["n"] >= 2 and r["l1_bytes"]["total"] <= 16000
    assert "split" not in solve_layer(fc, target(400000))


def test_deterministic_in_process_and_across_processes():
    lay = layer("pw", "pointwise", [32, 32, 64], [32, 32, 128])
    a = canon.dumps(solve_layer(lay, target(64000)))
    b = canon.dumps(solve_layer(copy.deepcopy(lay), target(64000, kernels=copy.deepcopy(REF))))
    assert a == b
    code = ("import json,sys,yaml; sys.path.insert(0, 'site_scons');"
            "from tessera.util import canon; from tessera.tiler import solve_layer;"
            "lay, t = json.loads(sys.argv[1]); t['kernels'] = yaml.safe_load(open(sys.argv[2]))['tiler'];"
            "print(canon.dumps(solve_layer(lay, t)))")
    t = {k: v for k, v in target(64000).items() if k != "kernels"}
    out = subprocess.run([sys.executable, "-c", code, canon.dumps([lay, t]), LIB_PATH],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert out.stdout.strip() == a


def test_library_weights_steer_the_answer():
    lay = layer("pw", "pointwise", [32, 32, 64], [32, 32, 128])
    lib = copy.deepcopy(REF)
    base = solve_layer(lay, target(64000, kernels=lib))
    # a library that strongly wants whole rows gets whole rows
    lib["defaults"]["objective"]["w_full"] = {
        "coef": 500, "of": ["l1_permille"], "when": {"tile_w": {"equals": "out_w"}}}
    r = solve_layer(lay, target(64000, kernels=lib))
    assert r["tile"]["w"] == 32 and r != base


def test_bad_library_and_layer_are_rejected():
    lay = layer("pw", "pointwise", [8, 8, 8], [8, 8, 8])
    lib = copy.deepcopy(REF)
    lib["ops"]["pointwise"] = {"objective": {"x": {"coef": 1, "of": ["tile_depth"]}}}
    with pytest.raises(ConfigError, match="unknown quantity 'tile_depth'"):
        solve_layer(lay, target(100, kernels=lib))
    lib = copy.deepcopy(REF)
    del lib["ops"]["pointwise"]
    with pytest.raises(ConfigError, match="no entry for op 'pointwise'"):
        solve_layer(lay, target(100, kernels=lib))
    lib = copy.deepcopy(REF)
    lib["ops"]["conv2d"]["scratch"]["im2col"]["of"] = ["l1_bytes"]
    with pytest.raises(ConfigError, match="unknown quantity 'l1_bytes'"):
        solve_layer(CONV1, target(100, kernels=lib))
    lib = copy.deepcopy(REF)
    lib["defaults"]["objective"]["h_cores"]["when"] = {"tile_h": {"multiple_of": "tile_w"}}
    with pytest.raises(ConfigError, match="multiple_of takes"):
        solve_layer(lay, target(100, kernels=lib))
    lib = copy.deepcopy(REF)
    lib["tile_cost"] = "fastest"
    with pytest.raises(ConfigError, match="tile_cost: must be library or model"):
        solve_layer(lay, target(100, kernels=lib))
    bad = dict(lay, out=[8, 8, 9], op="depthwise")
    with pytest.raises(ValueError, match="as many output channels"):
        solve_layer(bad, target(100))
    with pytest.raises(ValueError, match="does not match"):
        solve_layer(dict(CONV1, out=[63, 64, 32]), target(100))


def test_the_library_says_how_its_tiles_are_chosen():
    # the reference kernels tile by their objective; the PULP-NN-style ones
    # by the fitted cost model where a target has coefficients (the build's
    # tile_cost= overrides either)
    from tessera.tiler import library

    choice = {}
    for lib in ("reference", "pulp_nn", "cmsis_nn"):
        with open(os.path.join(ROOT, "kernels", lib, "library.yaml")) as f:
            choice[lib] = library.tile_cost(yaml.safe_load(f)["tiler"])
    assert choice == {"reference": "library", "pulp_nn": "model", "cmsis_nn": "library"}


def test_padding_only_on_border_tiles_limits_small_tiles():
    # 5x5 pad 2 stride 1: one-row tiles would pad the second tile too, so
    # the smallest legal row tile is 2 rows
    table = geometry.axis_table(16, 16, 5, 1, 2, 2)
    assert 1 not in table and min(table) == 2
    # the largest input extent is exact, not monotone: with 6 rows, 2-row
    # tiles have an unclipped middle tile (6 rows), 3-row tiles do not (5)
    table = geometry.axis_table(6, 6, 5, 1, 2, 2)
    assert table[2] == (3, 2, 6) and table[3] == (2, 3, 5)


# --- MobileNetV1 at 128x128, 64000 bytes of L1, 8 cores -------------------

MBV1 = [
    CONV1,
    layer("dw1", "depthwise", [64, 64, 32], [64, 64, 32], (3, 3), (1, 1), (1, 1, 1, 1)),
    layer("pw1", "pointwise", [64, 64, 32], [64, 64, 64]),
    layer("dw2", "depthwise", [64, 64, 64], [32, 32, 64], (3, 3), (2, 2), (0, 0, 1, 1)),
    layer("dw_64x64x64_s1", "depthwise", [64, 64, 64], [64, 64, 64], (3, 3), (1, 1),
          (1, 1, 1, 1)),
    layer("pw2", "pointwise", [32, 32, 64], [32, 32, 128]),
    layer("dw3", "depthwise", [32, 32, 128], [32, 32, 128], (3, 3), (1, 1), (1, 1, 1, 1)),
    layer("pw3", "pointwise", [32, 32, 128], [32, 32, 128]),
    layer("pw5", "pointwise", [16, 16, 128], [16, 16, 256]),
    layer("pw7", "pointwise", [8, 8, 256], [8, 8, 512]),
    layer("dw13", "depthwise", [4, 4, 1024], [4, 4, 1024], (3, 3), (1, 1), (1, 1, 1, 1)),
    layer("pw13", "pointwise", [4, 4, 512], [4, 4, 1024]),
    layer("pool", "avgpool", [4, 4, 1024], [1, 1, 1024], (4, 4)),
    layer("fc", "linear", [1, 1, 1024], [1, 1, 1000], out_bytes=4),
    layer("res_add", "add", [32, 32, 128], [32, 32, 128]),
]


@pytest.mark.parametrize("lay", MBV1, ids=[x["name"] for x in MBV1])
def test_mobilenet_v1_shapes(lay):
    t = target(64000, cores=8)
    t0 = time.perf_counter()
    r = solve_layer(lay, t)
    dt = time.perf_counter() - t0
    tile, it, n = r["tile"], r["in_tile"], r["n_tiles"]
    print(f"\n  {lay['name']:15s} {lay['op']:9s} in {'x'.join(map(str, lay['in'])):>10s}"
          f" out {'x'.join(map(str, lay['out'])):>10s}: "
          f"tile {tile['h']}x{tile['w']}x{tile['c']} (in {it['h']}x{it['w']}x{it['c']}), "
          f"{n['h'] * n['w'] * n['c']} tiles, L1 {r['l1_bytes']['total']} B, "
          f"{'optimal' if r['optimal'] else 'NOT proven optimal'}, {dt * 1000:.0f} ms")
    # (solve time is printed, never asserted: the machines are shared)
    assert r["optimal"]
    assert r["l1_bytes"]["total"] <= 64000
    if r["tiled"]:
        # large tiles: most of L1 is put to use
        assert r["l1_bytes"]["total"] >= 0.75 * 64000
        # DORY alignment: channels a multiple of 4, rows of the core count
        # whenever the layer is that large
        assert tile["c"] % 4 == 0
        if lay["out"][0] >= 8:
            assert tile["h"] % 8 == 0
    tl = list(tiles(lay, r))
    assert len(tl) == n["h"] * n["w"] * n["c"]


def test_total_matches_the_allocators_l1_layout():
    """The allocator packs exactly what the tiler counted (same alignment,
    one buffer per kind and input, `buffering` copies)."""
    from tessera.planning.alloc import l1
    for lay in MBV1 + [layer("odd", "depthwise", [9, 7, 5], [9, 7, 5], (3, 3), (1, 1),
                             (1, 1, 1, 1), params=7)]:
        for budget in (64000, 3001):
            try:
                r = solve_layer(lay, target(budget))
            except FitError:
                continue
            assert l1.l1_layout(r, align=REF["buffer_align"])["total"] == \
                r["l1_bytes"]["total"], lay["name"]


def test_dilated_conv_tiles_read_the_dilated_halo():
    """3x3 dilated by 2 (a 5x5 window), pad 2: a tile of oh output rows
    starting at oh0 reads input rows oh0 - 2 .. oh0 + oh + 1, clipped."""
    lay = layer("dil", "conv2d", [32, 32, 16], [32, 32, 16], (3, 3), (1, 1), (2, 2, 2, 2))
    lay["dilation"] = [2, 2]
    r = solve_layer(lay, target(12000))
    assert r["tiled"]
    for t in tiles(lay, r):
        top, bottom = t["oh0"] - 2, t["oh0"] + t["oh"] - 1 + 2
        assert t["ih0"] == max(0, top) and t["ih0"] + t["ih"] - 1 == min(31, bottom)
        assert t["pad"][0] == max(0, -top) and t["pad"][2] == max(0, bottom - 31)
    undilated = dict(lay, dilation=[1, 1])
    with pytest.raises(ValueError):   # pad 2 is as large as an undilated 3x3 kernel
        solve_layer(undilated, target(12000))


def test_whole_tensor_ops_are_one_tile_or_a_fit_error():
    lay = {"name": "cat", "op": "concat", "whole": 1, "in": [8, 8, 4], "out": [8, 8, 12],
           "kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "in_bytes": 1, "out_bytes": 1,
           "n_inputs": 2, "in_sizes": [256, 512], "w_bytes_per_cout": 0, "param_bytes_per_cout": 0}
    r = solve_layer(lay, target(64000))
    # both input buffers sized for the larger input, plus the output
    assert not r["tiled"] and r["l1_bytes"]["total"] == 2 * 512 + 768
    with pytest.raises(FitError, match="whole tensors"):
        solve_layer(lay, target(1791))
    assert solve_layer(lay, target(1792))["l1_bytes"]["total"] == 1792


def test_rows_asks_for_row_bands_when_they_fit():
    """`rows: 1` (the memory plan's request at its peak): full-width,
    all-channel row bands, else all channels, else the usual tile."""
    from tessera.tiler.memory import quantities
    dw = layer("dw", "depthwise", [64, 64, 64], [64, 64, 64], (3, 3), (1, 1), (1, 1, 1, 1))
    usual = solve_layer(dw, target(64000))
    assert usual["tile"]["c"] < 64 or usual["tile"]["w"] < 64   # not row bands on its own
    r = solve_layer(dict(dw, rows=1), target(64000))
    assert (r["tile"]["w"], r["tile"]["c"]) == (64, 64) and r["n_tiles"]["h"] > 1
    # the best full-width all-channel band: one row taller does not fit
    taller = quantities(dw, target(64000), _spec(), r["tile"]["h"] + 1, 64, 64, 2)
    assert taller is None or taller["l1_bytes"] > 64000
    # too small for a full-width band of all channels: all channels, narrower
    r = solve_layer(dict(dw, rows=1), target(6000))
    assert r["tile"]["c"] == 64 and r["tile"]["w"] < 64
    # too small for any all-channel tile: the usual answer
    r = solve_layer(dict(dw, rows=1), target(1500))
    assert r == solve_layer(dw, target(1500))


def _spec():
    from tessera.tiler import library
    return library.op_spec(REF, "depthwise")


def test_a_search_the_work_bound_ends_is_one_line_never_a_guess(monkeypatch):
    """The solve's bound is CP-SAT's deterministic time (its own work
    count), so where it stops is the same on every machine; a search it
    ends before the optimum is proven is one line naming the layer and the
    bound, not a tile that depends on where the search stopped (issue 35)."""
    from tessera.errors import TesseraError
    from tessera.tiler import model

    lay = layer("pw", "pointwise", [32, 32, 64], [32, 32, 128])
    monkeypatch.setattr(model, "MAX_DETERMINISTIC_TIME", 1e-9)
    with pytest.raises(TesseraError) as err:
        solve_layer(lay, target(64000))
    assert str(err.value).startswith("layer pw: ") and "MAX_DETERMINISTIC_TIME" in str(err.value)
    assert "\n" not in str(err.value)
