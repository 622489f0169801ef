"""Patched steps' geometry (tessera.tiles.patches): for random chains of
convolutions, depthwise and pointwise layers, pools and residual adds, every
patch tile and both halo policies, the ops the generated C runs compute,
on buffers of the tile level, exactly what the golden model computes layer
by layer on whole tensors; the byte replay of the tile level passes, and
fails when a buffer is moved onto another."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tessera.golden import ops
from tessera.ir import Requant
from tessera.tiles import patches


def _rq(c, rng):
    return Requant(mul=[int(v) for v in rng.integers(1 << 12, 1 << 14, c)], add=[0],
                   shift=[int(v) for v in rng.integers(16, 19, c)], zero_point=int(rng.integers(-5, 5)))


@st.composite
def chains(draw):
    """A chain view and its layers' parameters."""
    H = draw(st.integers(4, 17))
    W = draw(st.integers(4, 17))
    C = draw(st.integers(1, 5))
    tensors = [{"name": "x", "shape": [H, W, C], "esize": 1}]
    layers, params = [], []
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    n = draw(st.integers(2, 6))

    def append(op, inputs, kern, stride, pad, co):
        h, w, c = tensors[inputs[-1]]["shape"]
        ho = (h + pad[0] + pad[2] - kern[0]) // stride[0] + 1
        wo = (w + pad[1] + pad[3] - kern[1]) // stride[1] + 1
        if ho < 1 or wo < 1:
            return False
        k = len(layers)
        tensors.append({"name": f"t{k + 1}", "shape": [ho, wo, co], "esize": 1})
        layers.append({"name": f"l{k}", "op": op, "kernel": kern, "stride": stride, "pad": pad,
                       "inputs": inputs, "output": len(tensors) - 1})
        p = {"rq": _rq(co, rng), "off": int(rng.integers(-3, 4))}
        if op == "conv2d":
            p["w"] = rng.integers(-8, 8, (co, kern[0], kern[1], c))
        elif op == "depthwise":
            p["w"] = rng.integers(-8, 8, (kern[0], kern[1], c))
        elif op == "pointwise":
            p["w"] = rng.integers(-8, 8, (co, c))
        if op in ("conv2d", "depthwise", "pointwise"):
            p["b"] = rng.integers(-50, 50, co)
        params.append(p)
        return True
    one = ([1, 1], [1, 1], [0, 0, 0, 0])
    for _ in range(n):
        h, w, c = tensors[-1]["shape"]
        last = len(tensors) - 1
        same = [t for t, x in enumerate(tensors[:-1]) if x["shape"] == [h, w, c]]
        kinds = ["conv", "dw", "pw", "maxpool", "avgpool", "block", "block"] + (["add"] * 2 if same else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "add":
            ok = append("add", [draw(st.sampled_from(same)), last], *one, c)
        elif kind == "block":
            # an inverted bottleneck: expand, depthwise 3x3 (stride 1 or 2), project, add when stride 1
            s2 = draw(st.sampled_from([1, 1, 2]))
            append("pointwise", [last], *one, c * draw(st.integers(2, 4)))
            ok = append("depthwise", [len(tensors) - 1], [3, 3], [s2, s2], [1, 1, 1, 1], tensors[-1]["shape"][2])
            append("pointwise", [len(tensors) - 1], *one, c)
            if s2 == 1:
                append("add", [last, len(tensors) - 1], *one, c)
        elif kind == "pw":
            ok = append("pointwise", [last], *one, draw(st.integers(1, 6)))
        elif kind in ("conv", "dw"):
            kh, kw = draw(st.sampled_from([(3, 3), (1, 3), (3, 1), (5, 5), (2, 2)]))
            s = draw(st.sampled_from([1, 1, 2]))
            p = (kh // 2, kw // 2) if draw(st.booleans()) else (0, 0)
            ok = append("conv2d" if kind == "conv" else "depthwise", [last], [kh, kw], [s, s],
                        [p[0], p[1], p[0], p[1]], draw(st.integers(1, 6)) if kind == "conv" else c)
        else:
            k2 = draw(st.sampled_from([2, 3]))
            pad = [k2 // 2 * (kind == "maxpool")] * 4 if k2 == 3 else [0, 0, 0, 0]
            ok = append(kind, [last], [k2, k2], [2, 2], pad, c)
        if not ok:
            break
    if not layers:
        return None
    chain = {"name": "chain", "tensors": tensors, "layers": layers}
    x = rng.integers(-128, 128, (H, W, C))
    return chain, params, x


def _layer(layer, p, xs, pad):
    op = layer["op"]
    if op == "conv2d":
        acc = ops.conv2d(xs[0], p["w"], p["b"], p["off"], layer["kernel"], layer["stride"], pad)
    elif op == "depthwise":
        acc = ops.depthwise(xs[0], p["w"], p["b"], p["off"], layer["kernel"], layer["stride"], pad)
    elif op == "pointwise":
        acc = ops.pointwise(xs[0], p["w"], p["b"], p["off"])
    elif op == "maxpool":
        return ops.maxpool(xs[0], layer["kernel"], layer["stride"], pad)
    elif op == "avgpool":
        assert not any(pad)
        acc = ops.avgpool_sum(xs[0], p["off"], layer["kernel"], layer["stride"])
    else:
        acc = ops.add(xs[0], xs[1], [3, 5], [p["off"], 1])
    return ops.requantize(acc, p["rq"])


def whole(chain, params, x):
    vals = [x]
    for layer, p in zip(chain["layers"], params):
        vals.append(_layer(layer, p, [vals[t] for t in layer["inputs"]], layer["pad"]).astype(np.int64))
    return vals[-1]


def patched(chain, params, x, prog):
    """The ops run with the golden arithmetic on a byte array standing for
    the tile level."""
    mem = np.full(prog["bytes"], 99, dtype=np.int64)
    y = np.zeros(chain["tensors"][-1]["shape"], dtype=np.int64)
    shp = [t["shape"] for t in chain["tensors"]]
    for o in prog["ops"]:
        if o["op"] == "shift":
            mem[o["to"]:o["to"] + o["bytes"]] = mem[o["from"]:o["from"] + o["bytes"]].copy()
        elif o["op"] == "load":
            (r0, n), (c0, m) = o["rows"], o["cols"]
            mem[o["to"]:o["to"] + n * m * shp[0][2]] = x[r0:r0 + n, c0:c0 + m].ravel()
        elif o["op"] == "call":
            layer = chain["layers"][o["layer"]]
            at, h, w = o["in"]
            c = shp[layer["inputs"][0]][2]
            xin = mem[at:at + h * w * c].reshape(h, w, c)
            out = _layer(layer, params[o["layer"]], [xin], o["pad"])
            at, h, w = o["out"]
            assert out.shape[:2] == (h, w), (layer["name"], out.shape, h, w)
            mem[at:at + out.size] = out.ravel()
        elif o["op"] == "add":
            layer = chain["layers"][o["layer"]]
            c = shp[layer["output"]][2]
            for r in range(o["rows"]):
                a = mem[o["a"][0] + r * o["a"][1]:][:o["n"]].reshape(1, -1, c)
                b = mem[o["b"][0] + r * o["b"][1]:][:o["n"]].reshape(1, -1, c)
                out = _layer(layer, params[o["layer"]], [a, b], [0] * 4)
                mem[o["out"][0] + r * o["out"][1]:][:o["n"]] = out.ravel()
        elif o["op"] == "store":
            (r0, n), (c0, m) = o["rows"], o["cols"]
            y[r0:r0 + n, c0:c0 + m] = mem[o["from"]:o["from"] + n * m * shp[-1][2]].reshape(n, m, -1)
    return y


@settings(max_examples=120, deadline=None)
@given(chains(), st.integers(1, 6), st.integers(1, 6), st.sampled_from(patches.POLICIES))
def test_patched_ops_compute_the_layers(drawn, ph, pw, policy):
    if drawn is None:
        return
    chain, params, x = drawn
    Ho, Wo, _ = chain["tensors"][-1]["shape"]
    tile = (min(ph, Ho), min(pw, Wo))
    try:
        prog = patches.program(chain, tile, policy)
    except patches.Infeasible:
        return
    patches.verify(chain, prog)
    np.testing.assert_array_equal(patched(chain, params, x, prog), whole(chain, params, x))
    # every output element is stored exactly once
    seen = np.zeros((Ho, Wo), dtype=int)
    for reads, writes in patches.windows(chain, prog):
        for h0, h, w0, w, _, _ in writes:
            seen[h0:h0 + h, w0:w0 + w] += 1
    assert (seen == 1).all()


def mbv2_block(H=16, C=8, t=6):
    """An inverted bottleneck with its residual: expand, 3x3 depthwise,
    project, add."""
    tensors = [{"name": n, "shape": s, "esize": 1} for n, s in
               (("x", [H, H, C]), ("e", [H, H, C * t]), ("d", [H, H, C * t]), ("p", [H, H, C]), ("y", [H, H, C]))]
    one = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0]}
    layers = [dict(name="expand", op="pointwise", inputs=[0], output=1, **one),
              dict(name="dw", op="depthwise", kernel=[3, 3], stride=[1, 1], pad=[1, 1, 1, 1], inputs=[1], output=2),
              dict(name="project", op="pointwise", inputs=[2], output=3, **one),
              dict(name="add", op="add", inputs=[0, 3], output=4, **one)]
    return {"name": "block", "tensors": tensors, "layers": layers}


def test_cache_computes_each_row_once_and_recompute_its_halos():
    """One column of 2-row bands over a 16x16 bottleneck: with `cache` the
    expansion computes each of its 16 rows once (kept rows shifted up),
    with `recompute` every band computes its 2 rows and the 2 halo rows."""
    chain = mbv2_block()
    rows = {}
    for policy in patches.POLICIES:
        prog = patches.program(chain, (2, 16), policy)
        patches.verify(chain, prog)
        rows[policy] = sum(o["out"][1] for o in prog["ops"] if o["op"] == "call" and o["layer"] == 0)
        assert prog["patches"] == 8
    assert rows["cache"] == 16
    assert rows["recompute"] == 16 + 2 * 7      # halo rows: one above and one below each inner band edge
    cache = patches.program(chain, (2, 16), "cache")
    # the expansion's buffer keeps 2 rows (3x3 window over 2 new rows): 4 rows of 16 x 48
    assert cache["buffers"]["e"][1] == 4 * 16 * 48
    assert sum(o["bytes"] for o in cache["ops"] if o["op"] == "shift") == cache["shifted"] > 0


def test_replay_catches_a_buffer_moved_onto_another():
    chain = mbv2_block()
    prog = patches.program(chain, (2, 16), "cache")
    bad = dict(prog, ops=[dict(o, to=o["to"] + 16) if o["op"] == "load" else o for o in prog["ops"]])
    with pytest.raises(AssertionError, match="reads tensor 0 row"):
        patches.verify(chain, bad)
