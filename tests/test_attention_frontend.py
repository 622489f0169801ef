"""QuantLib/Deeploy attention graphs written here with onnx.helper (so the
suite covers them without a Deeploy snapshot): multi-head attention with
the head split and merge of Deeploy's exports (Reshape, Transpose [0, 2, 1,
3] and [0, 2, 3, 1]), iSoftmax/ITAMax/ITAPartialMax, iLayerNorm, iGELU and
IntegerMean, the golden model against the graph evaluated in ONNX's own
layout by a NumPy interpreter of the ONNX ops (Deeploy's kernels'
arithmetic for its custom ops); and the one-line errors for what tessera
does not lower."""

import numpy as np
import pytest
from onnx import helper

from tessera import golden
from tessera.errors import FrontendError
from tessera.frontend import import_onnx
from tessera.frontend.layout import from_hwc
from test_peer_frontend import const, n, save

rng = np.random.default_rng(7)


def rqs(x, y, mul, div=2 ** 12, add=0, signed=1):
    return [n("RequantShift", [x, y + "_m", y + "_a"], [y], div=float(div), n_levels_out=256.0, signed=float(signed))], \
        {y + "_m": np.float32(mul), y + "_a": np.float32(add)}


def attention_graph(tmp_path, tokens, heads, dh, softmax="iSoftmax", norm=False):
    """Deeploy's MHSA: Q, K, V projections; Q split into heads, K split and
    transposed, scores, softmax, P.V, heads merged, output projection (with
    `norm`, an iLayerNorm before it, as in CCT's blocks)."""
    d = heads * dh
    nodes, inits, x = [], {}, "input"
    if norm:
        nodes.append(n("iLayerNorm", ["input", "lw", "lb"], ["ln"], D=2.0 ** 14, n_levels=256.0))
        inits.update(lw=rng.integers(200000, 300000, d), lb=rng.integers(-30000, 30000, d))
        x = "ln"
    for name in ("q", "k", "v"):
        inits[f"w{name}"] = rng.integers(-20, 21, (d, d)).astype(np.float32)
        nodes.append(n("MatMul", [x, f"w{name}"], [f"{name}_acc"]))
        r, i = rqs(f"{name}_acc", name, 3)
        nodes += r
        inits.update(i)
    nodes += [const("split", [1, -1, heads, dh]),
              n("Reshape", ["q", "split"], ["q4"]), n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
              n("Reshape", ["k", "split"], ["k4"]), n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              n("Reshape", ["v", "split"], ["v4"]), n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
              n("MatMul", ["qh", "kt"], ["s_acc"])]
    r, i = rqs("s_acc", "s", 5)
    nodes += r
    inits.update(i)
    attrs = {"iSoftmax": dict(coeffA=1.0, coeffB=173.0, coeffC=15599.0, log2=127.0, n_levels=256.0),
             "ITAMax": dict(n_levels=256.0), "ITAPartialMax": dict(group_width=4, n_levels=256.0)}[softmax]
    nodes += [helper.make_node(softmax, ["s"], ["p"], name="softmax", domain="", **attrs),
              n("MatMul", ["p", "vh"], ["o_acc"])]
    r, i = rqs("o_acc", "o", 2)
    nodes += r
    inits.update(i)
    inits["wo"] = rng.integers(-20, 21, (d, d)).astype(np.float32)
    nodes += [n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), const("merge", [1, -1, d]),
              n("Reshape", ["ot", "merge"], ["om"]), n("MatMul", ["om", "wo"], ["y_acc"])]
    r, i = rqs("y_acc", "output", 3)
    nodes += r
    inits.update(i)
    return save(tmp_path, f"mhsa_{softmax}{'_ln' if norm else ''}", nodes, inits, [("input", [1, tokens, d])],
                [("output", [1, tokens, d])], opset=13)


def _ita_shift(d):
    return (d + 16) >> 5


def onnx_eval(path, feeds):
    """The graph in ONNX's layout: plain ONNX ops, and Deeploy's custom ones
    as its Generic kernels compute them (TargetLibraries/Generic/src)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    v = {i.name: numpy_helper.to_array(i).astype(np.int64) for i in m.graph.initializer}
    v.update(feeds)
    for node in m.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        x = [v.get(i) for i in node.input]
        op = node.op_type
        if op == "Constant":
            y = numpy_helper.to_array(a["value"]).astype(np.int64)
        elif op == "MatMul":
            y = np.matmul(x[0], x[1])
        elif op == "Reshape":
            y = x[0].reshape(x[1])
        elif op == "Transpose":
            y = x[0].transpose(a["perm"])
        elif op == "RequantShift":
            div = int(a["div"])
            y = (x[0] * x[1] + x[2] + div // 2) // div
            y = np.clip(y, -128, 127) if a["signed"] else np.clip(y, 0, 255)
        elif op == "iSoftmax":
            t = x[0] - x[0].max(-1, keepdims=True)
            z = np.minimum((-t) // int(a["log2"]), 31)
            p = t + z * int(a["log2"])
            e = (int(a["coeffA"]) * (p + int(a["coeffB"])) ** 2 + int(a["coeffC"])) >> z
            y = e * 255 // e.sum(-1, keepdims=True)
        elif op == "ITAMax":
            k = _ita_shift(x[0].max(-1, keepdims=True) - x[0])
            y = (255 * 256 // (256 >> k).sum(-1, keepdims=True)) >> k
        elif op == "ITAPartialMax":
            g = int(a["group_width"])
            rows = x[0].reshape(-1, x[0].shape[-1])
            y = np.zeros_like(rows)
            for r, row in enumerate(rows):
                s, gmax = 0, -128
                for j in range(len(row) // g):
                    blk = row[j * g:(j + 1) * g]
                    shift = _ita_shift(blk.max() - gmax) if blk.max() > gmax else 0
                    gmax = max(gmax, blk.max())
                    s = (s >> shift) + int((256 >> _ita_shift(gmax - blk)).sum())
                y[r] = (127 * 256 // s) >> _ita_shift(gmax - row)
            y = y.reshape(x[0].shape)
        elif op == "iLayerNorm":
            xs, nn = x[0], x[0].shape[-1]
            mean = np.trunc(xs.sum(-1, keepdims=True) / nn).astype(np.int64)
            t = xs - mean
            std = np.floor(np.sqrt((t * t).sum(-1, keepdims=True) // nn + 1)).astype(np.int64)
            y = np.clip((np.trunc(t * x[1] / std).astype(np.int64) + x[2]) >> (int(a["D"]).bit_length() - 1), -128, 127)
        elif op == "iGELU":
            b, one = int(a["b"]), int(a["one"])
            q = np.minimum(np.abs(x[0]), -b)
            y = x[0] * ((one + np.sign(x[0]) * (-(q + b) ** 2 + one)) >> 1)
        elif op == "IntegerMean":
            cnt = x[0].shape[a["axes"][0]]
            y = (x[0].sum(axis=a["axes"][0], keepdims=bool(a["keepdims"])) + cnt // 2) >> (cnt.bit_length() - 1)
        else:
            raise AssertionError(op)
        v[node.output[0]] = y
    return {o.name: v[o.name] for o in m.graph.output}


def check(path, shape, lo=-128, hi=127):
    x = rng.integers(lo, hi + 1, shape)
    graph, weights = import_onnx(path, "t")
    got = golden.run(graph, weights, {graph.inputs[0]: x.reshape(graph.tensor(graph.inputs[0]).shape)})
    want = onnx_eval(path, {"input": x})["output"]
    out = graph.tensor(graph.outputs[0])
    np.testing.assert_array_equal(from_hwc(got[graph.outputs[0]].astype(np.int64) + out.shift, "hwc", want.shape), want)
    return graph


@pytest.mark.parametrize("softmax", ["iSoftmax", "ITAMax", "ITAPartialMax"])
@pytest.mark.parametrize("tokens, heads, dh", [(12, 4, 3), (8, 1, 16), (5, 2, 8)])
def test_multi_head_attention_matches_onnx(tmp_path, softmax, tokens, heads, dh):
    if softmax == "ITAPartialMax" and tokens % 4:
        pytest.skip("groups of 4 columns")
    graph = check(attention_graph(tmp_path, tokens, heads, dh, softmax), [1, tokens, heads * dh])
    ops = [layer.op for layer in graph.layers]
    assert ops.count("matmul") == 2 and ops.count("softmax") == 1
    # a single head: the head split moves no data, K's transpose is a 2D one
    assert ops.count("transpose") == (1 if heads == 1 else 4)


def test_layernorm_gelu_and_mean(tmp_path):
    """CCT's feed-forward tail: iLayerNorm, a linear layer, iGELU with its
    RequantShift (one table), IntegerMean over the tokens."""
    c, t = 16, 8
    nodes = [n("iLayerNorm", ["input", "lw", "lb"], ["ln"], D=2.0 ** 14, n_levels=256.0),
             n("MatMul", ["ln", "w1"], ["h_acc"])]
    r1, i1 = rqs("h_acc", "h", 5)
    r2, i2 = rqs("g", "gq", 13, div=2 ** 14)
    nodes += r1 + [n("iGELU", ["h"], ["g"], b=-40, one=1743)] + r2 + \
        [n("IntegerMean", ["gq"], ["output"], axes=[1], keepdims=0)]
    inits = {"lw": rng.integers(200000, 300000, c), "lb": rng.integers(-30000, 30000, c),
             "w1": rng.integers(-20, 21, (c, 2 * c)), **i1, **i2}
    path = save(tmp_path, "ff", nodes, inits, [("input", [1, t, c])], [("output", [1, 2 * c])], opset=13)
    graph = check(path, [1, t, c])
    assert [layer.op for layer in graph.layers] == ["layernorm", "pointwise", "lut", "avgpool"]


def test_attention_in_a_small_l1_is_bit_exact_on_host(tmp_path):
    """A single head of 48 tokens after a layer norm, on the host with 3000
    bytes of L1: the layer norm and the softmax run in blocks of tokens (the
    [1, 48, C] tensor's pixels as rows), K's [1, 48, 32] -> [1, 32, 48]
    transpose in blocks of its output rows, the two products of activations
    in tiles; every layer bit-exact."""
    import json

    import yaml

    from helpers import ROOT, scons
    onnx_path = attention_graph(tmp_path, 48, 1, 32, "ITAMax", norm=True)
    (tmp_path / "m.yaml").write_text(f"description: one head after a layer norm\nonnx: {onnx_path}\n"
                                     "input: {seed: 3}\n")
    with open(f"{ROOT}/targets/host.yaml") as f:
        target = yaml.safe_load(f)
    target["memory"]["L1"]["size"] = 3000
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(target))
    scons(f"target={tmp_path / 'small.yaml'}", f"model={tmp_path / 'm.yaml'}", out=tmp_path / "out", check=True)
    net = tmp_path / "out" / "small" / "m"
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    tiles = {}
    for path in (net / "tiling").glob("*.json"):
        t = json.loads(path.read_text())
        tiles[path.stem] = t
    by_op = {}
    graph, _ = import_onnx(onnx_path, "m")
    for layer in graph.layers:
        t = tiles[layer.name]
        by_op.setdefault(layer.op, []).append(t["n_tiles"]["h"] * t["n_tiles"]["w"] * t["n_tiles"]["c"])
    for op in ("layernorm", "softmax", "transpose", "matmul"):
        assert by_op[op] and min(by_op[op]) > 1, (op, by_op)
    # iLayerNorm's weight and bias (int32 per channel) sit in L1 beside the
    # blocks, and the generated code reads them there
    norm = next(layer for layer in graph.layers if layer.op == "layernorm")
    channels = graph.tensor(norm.output).shape[2]
    assert tiles[norm.name]["l1_bytes"]["params"] == 2 * 4 * channels
    code = (net / "src" / f"{norm.name}.c").read_text()
    assert "a.weight = (const int32_t *)(" in code and "a.bias = (const int32_t *)(" in code


def _error(tmp_path, nodes, inits, shape, out_shape):
    path = save(tmp_path, "bad", nodes, inits, [("input", shape)], [("output", out_shape)], opset=13)
    with pytest.raises(FrontendError) as err:
        import_onnx(path, "bad")
    return str(err.value)


def test_gather_of_a_head_is_one_line(tmp_path):
    msg = _error(tmp_path, [const("i", 1), n("Gather", ["input", "i"], ["g"], axis=1),
                            n("iSoftmax", ["g"], ["output"], coeffA=1.0, coeffB=173.0, coeffC=15599.0, log2=127.0,
                              n_levels=256.0)], {}, [1, 4, 8, 8], [1, 8, 8])
    assert "'g_node' (Gather)" in msg and "axis of size 1" in msg and "\n" not in msg


def test_igelu_without_requantshift_is_one_line(tmp_path):
    msg = _error(tmp_path, [n("iGELU", ["input"], ["output"], b=-40, one=1743)], {}, [1, 8, 16], [1, 8, 16])
    assert "iGELU whose int32 output is not requantized" in msg


def test_softmax_over_another_axis_is_one_line(tmp_path):
    msg = _error(tmp_path, [n("iSoftmax", ["input"], ["output"], axis=1, coeffA=1.0, coeffB=173.0, coeffC=15599.0,
                              log2=127.0, n_levels=256.0)], {}, [1, 8, 16], [1, 8, 16])
    assert "over axis 1" in msg and "last axis" in msg


def test_isoftmax_leaving_32_bits_is_one_line(tmp_path):
    msg = _error(tmp_path, [n("iSoftmax", ["input"], ["output"], coeffA=4096.0, coeffB=345.0, coeffC=0.0,
                              log2=255.0, n_levels=256.0)], {}, [1, 8, 16], [1, 8, 16])
    assert "leaves 32 bits" in msg and "32-bit range" in msg
