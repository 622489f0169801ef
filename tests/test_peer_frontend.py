"""The integer dialects on small graphs written here with onnx.helper:
NEMO patterns the peer networks do not exercise (Pad folded into a Conv,
pools, Gemm with bias) checked bit for bit against ONNX Runtime, and the
errors a user sees for what tessera cannot lower."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera import golden
from tessera.errors import FrontendError
from tessera.frontend import import_onnx
from tessera.frontend.layout import from_hwc
from tessera.frontend.nemo import exact_divider

rng = np.random.default_rng(0)


def save(tmp_path, name, nodes, inits, inputs, outputs, opset=9, domains=()):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                              + [helper.make_opsetid(d, 1) for d in domains])
    model.ir_version = 6
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    return path


def n(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=outs[0] + "_node", **kw)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name + "_node",
                            value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def requant_chain(x, y, channels, tag, m=3, d=2 ** 12, lo=0.0, hi=255.0):
    """NEMO's batch-norm + requantization chain, as in the DORY graphs."""
    kappa = rng.integers(1, 16, (1, channels, 1, 1)).astype(np.float32)
    lamda = rng.integers(-5000, 5000, (1, channels, 1, 1)).astype(np.float32)
    nodes = [n("Mul", [f"{tag}_k", x], [f"{tag}_a"]), n("Add", [f"{tag}_a", f"{tag}_l"], [f"{tag}_b"]),
             n("Cast", [f"{tag}_b"], [f"{tag}_c"], to=7), const(f"{tag}_m", [m]),
             n("Mul", [f"{tag}_c", f"{tag}_m"], [f"{tag}_d"]), const(f"{tag}_q", d),
             n("Div", [f"{tag}_d", f"{tag}_q"], [f"{tag}_e"]), n("Cast", [f"{tag}_e"], [f"{tag}_f"], to=1),
             n("Clip", [f"{tag}_f"], [y], min=lo, max=hi)]
    return nodes, {f"{tag}_k": kappa, f"{tag}_l": lamda}


def wts(*shape, lim=20):
    return rng.integers(-lim, lim + 1, shape).astype(np.float32)


def nemo_net(tmp_path):
    """Pad -> Conv -> chain -> AveragePool 3x3 (area 9) -> Floor -> chain;
    residual Add; GlobalAveragePool -> Flatten -> Gemm with bias."""
    c1, rq1 = requant_chain("c1", "r1", 4, "q1")
    c2, rq2 = requant_chain("c2", "r2", 4, "q2", m=5, d=2 ** 10)
    nodes = [n("Pad", ["input"], ["p"], pads=[0, 0, 1, 2, 0, 0, 1, 0], value=0.0),
             n("Conv", ["p", "w1"], ["c1"], kernel_shape=[3, 3], strides=[1, 1]), *c1,
             n("AveragePool", ["r1"], ["ap"], kernel_shape=[3, 3], strides=[1, 1]),
             n("Floor", ["ap"], ["apf"]),
             n("Conv", ["apf", "w2"], ["c2"], kernel_shape=[1, 1]), *c2,
             const("s1", 4.0, np.float32), const("s2", 2.0, np.float32), const("dv", 4.0, np.float32),
             n("Mul", ["r2", "s1"], ["m1"]), n("Mul", ["apf", "s2"], ["m2"]),
             n("Add", ["m1", "m2"], ["sum"]), n("Div", ["sum", "dv"], ["sd"]), n("Floor", ["sd"], ["res"]),
             n("GlobalAveragePool", ["res"], ["gap"]), n("Floor", ["gap"], ["gapf"]),
             n("Flatten", ["gapf"], ["flat"]),
             n("Gemm", ["flat", "wf", "bf"], ["logits"], transB=1),
             n("Sigmoid", ["logits"], ["prob"])]
    inits = {"w1": wts(4, 3, 3, 3), "w2": wts(4, 4, 1, 1), "wf": wts(5, 4), "bf": wts(5, lim=300), **rq1, **rq2}
    return save(tmp_path, "nemo_net", nodes, inits, [("input", [1, 3, 8, 8])], [("prob", [1, 5])])


def ort_values(path, names, feeds):
    import onnxruntime as ort
    model = onnx.load(path)
    for name in names:
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, feeds)))


def test_nemo_patterns_match_onnx_runtime(tmp_path):
    path = nemo_net(tmp_path)
    graph, weights = import_onnx(path, "nemo_net")
    assert graph.dialect == "nemo"
    assert [l.op for l in graph.layers] == ["conv2d", "avgpool", "pointwise", "add", "avgpool", "linear"]
    assert graph.layers[0].pad == [1, 2, 1, 0]          # the Pad, folded
    assert graph.outputs == ["logits"]                  # the Sigmoid is float post-processing
    for seed in range(3):
        x = np.random.default_rng(seed).integers(0, 256, (1, 3, 8, 8))
        t = graph.tensor("input")
        values = golden.run(graph, weights, {"input": x[0].transpose(1, 2, 0) - t.shift})
        names = [l.output for l in graph.layers]
        ref = ort_values(path, names, {"input": x.astype(np.float32)})
        for name in names:
            t = graph.tensor(name)
            got = from_hwc(values[name].astype(np.int64) + t.shift, "chw", ref[name].shape)
            assert np.array_equal(got, ref[name]), name
        assert ref["r1"].max() > 0 and ref["res"].max() > 0


def test_exact_divider():
    for den, mul, add in [(9, 1, 0), (49, 3, -1000), (25, -2, 77)]:
        m, a, s, k = exact_divider(mul, add, den, 0, 255 * den)
        acc = np.arange(0, 255 * den + 1, dtype=np.int64)
        assert np.array_equal(((acc * m + a) >> s) - k, (acc * mul + add) // den)


def chain_graph(tmp_path, name, tail_nodes, tail_inits=None, chain_kw=None):
    c, rq = requant_chain("c", "r", 2, "q", **(chain_kw or {}))
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[1, 1]), *c, *tail_nodes]
    out = tail_nodes[-1].output[0] if tail_nodes else "r"
    return save(tmp_path, name, nodes, {"w": wts(2, 2, 1, 1), **rq, **(tail_inits or {})},
                [("input", [1, 2, 4, 4])], [(out, [1, 2, 4, 4])])


def import_error(path):
    """The one-line FrontendError importing `path` raises."""
    with pytest.raises(FrontendError) as err:
        import_onnx(path, "x")
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_nemo_op_outside_the_dialect(tmp_path):
    msg = import_error(chain_graph(tmp_path, "nemo_tanh", [n("Tanh", ["r"], ["out"])]))
    assert "nemo_tanh.onnx" in msg and "'out_node'" in msg and "Tanh" in msg
    assert "outside the nemo dialect" in msg


def test_nemo_division_by_a_non_positive_constant(tmp_path):
    path = chain_graph(tmp_path, "nemo_div0", [], chain_kw={"d": -3})
    with pytest.raises(FrontendError, match=r"'q_e_node' \(Div\).*not one positive integer"):
        import_onnx(path, "x")


def test_nemo_truncating_division_needs_a_non_negative_clamp(tmp_path):
    path = chain_graph(tmp_path, "nemo_trunc", [], chain_kw={"lo": -128.0, "hi": 127.0})
    with pytest.raises(FrontendError, match="truncates toward zero"):
        import_onnx(path, "x")


def rqs_graph(tmp_path, name, div, extra=()):
    attrs = {"div": float(div), "n_levels": 256.0, "signed": 1.0}
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("RequantShift", ["c", "mul", "add"], ["out"], name="rqs_bad", domain="PACTOps",
                              **attrs), *extra]
    inits = {"w": wts(2, 2, 1, 1), "mul": np.array([3.0, 5.0]).reshape(2, 1, 1), "add": np.zeros((2, 1, 1))}
    out = extra[-1].output[0] if extra else "out"
    return save(tmp_path, name, nodes, inits, [("input", [1, 2, 4, 4])], [(out, [1, 2, 4, 4])],
                opset=11, domains=("PACTOps",))


def test_requantshift_div_must_be_a_power_of_two(tmp_path):
    msg = import_error(rqs_graph(tmp_path, "rqs_div3", 3))
    assert "rqs_div3.onnx" in msg and "'rqs_bad'" in msg and "RequantShift" in msg
    assert "div=3 is not a power of two" in msg


def test_quantlib_op_outside_the_dialect(tmp_path):
    path = rqs_graph(tmp_path, "rqs_relu", 256, [n("Relu", ["out"], ["act"])])
    graph_err = pytest.raises(FrontendError, match=r"'act_node' \(Relu\).*outside the quantlib dialect")
    with graph_err:
        import_onnx(path, "x")


def test_quantlib_lowering_matches_its_formula(tmp_path):
    path = rqs_graph(tmp_path, "rqs_ok", 16)
    graph, weights = import_onnx(path, "x", {"input": "uint8"})
    x = np.random.default_rng(1).integers(0, 256, (1, 2, 4, 4))
    t = graph.tensor("input")
    y = golden.run(graph, weights, {"input": x[0].transpose(1, 2, 0) - t.shift})["out"]
    w = onnx.numpy_helper.to_array(onnx.load(path).graph.initializer[0]).reshape(2, 2)
    acc = np.einsum("oc,nchw->nohw", w.astype(np.int64), x)
    expect = np.clip(np.floor((acc * np.array([3, 5]).reshape(1, 2, 1, 1) + 8) / 16), -128, 127)
    assert np.array_equal(y.transpose(2, 0, 1)[None], expect)


def test_standalone_pad_matches_onnx_runtime(tmp_path):
    """A Pad a Conv cannot absorb (non-zero value) is a layer of its own; a
    zero Pad before a max pool of uint8 values folds into its padding."""
    c, rq = requant_chain("c", "r", 2, "q")
    nodes = [n("Pad", ["input"], ["p"], pads=[0, 0, 2, 0, 0, 0, 0, 1], value=7.0),
             n("Conv", ["p", "w"], ["c"], kernel_shape=[3, 3]), *c,
             n("Pad", ["r"], ["p2"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0),
             n("MaxPool", ["p2"], ["out"], kernel_shape=[2, 2], strides=[2, 2])]
    path = save(tmp_path, "pads", nodes, {"w": wts(2, 2, 3, 3), **rq}, [("input", [1, 2, 6, 6])],
                [("out", [1, 2, 3, 3])])
    graph, weights = import_onnx(path, "pads")
    assert [l.op for l in graph.layers] == ["depthwise", "conv2d", "maxpool"]
    assert graph.layers[2].pad == [1, 1, 1, 1]
    assert all(p < k for l in graph.layers for p, k in zip(l.pad, l.kernel * 2))
    x = np.random.default_rng(3).integers(0, 256, (1, 2, 6, 6))
    t = graph.tensor("input")
    values = golden.run(graph, weights, {"input": x[0].transpose(1, 2, 0) - t.shift})
    names = [l.output for l in graph.layers]
    ref = ort_values(path, names, {"input": x.astype(np.float32)})
    for name in names:
        got = from_hwc(values[name].astype(np.int64) + graph.tensor(name).shift, "chw", ref[name].shape)
        assert np.array_equal(got, ref[name]), name


def test_quantlib_average_pool_is_named(tmp_path):
    # ONNX's AveragePool yields a mean the QuantLib graph does not say how to round
    path = rqs_graph(tmp_path, "rqs_avg", 16, [n("AveragePool", ["out"], ["avg"], kernel_shape=[2, 2])])
    with pytest.raises(FrontendError, match=r"'avg_node' \(AveragePool\): average pooling over 4 values"):
        import_onnx(path, "x")
