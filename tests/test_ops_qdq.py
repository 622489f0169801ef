"""The operators of real exports (issue 10) in QDQ graphs quantized by ONNX
Runtime: each lowers to the IR op it should, and every layer of the golden
model is within 1 LSB of ONNX Runtime (each layer fed ORT's own input)."""

import numpy as np
import pytest

from opgraphs import KINDS, build, quantize
from tessera.frontend import import_onnx
from tessera.golden import random_input
from tessera.golden.ortcheck import compare

# the IR ops each graph must produce (checks the lowering, not only the numbers)
EXPECT = {"dilated": {"conv2d", "depthwise"}, "tcn1d": {"conv2d", "depthwise", "maxpool", "avgpool"},
          "se": {"lut", "avgpool", "mul", "add"}, "se_sigmoid": {"lut", "avgpool", "mul"},
          "swish": {"lut", "mul"}, "clamped": {"resize", "concat", "avgpool", "lut"},
          "resize_sizes": {"resize"}, "seg": {"resize", "concat", "softmax"},
          "mul_spatial": {"mul", "lut"}, "resize_nearest": {"resize", "concat"},
          "resize_bilinear": {"resize", "concat"}, "resize_align": {"resize", "concat"},
          "softmax": {"linear", "softmax"}, "pools": {"maxpool", "avgpool", "concat"},
          "Clip": {"conv2d", "pointwise"},   # folded into the convolutions' clamps
          "mbv3": {"lut", "mul", "resize", "concat", "depthwise", "add"}}


@pytest.mark.parametrize("activation", ["int8", "uint8"])
@pytest.mark.parametrize("kind", KINDS)
def test_golden_within_one_lsb_of_onnx_runtime(tmp_path, kind, activation):
    path = quantize(build(kind), tmp_path / f"{kind}.onnx", activation=activation)
    graph, weights = import_onnx(path, kind)
    ops = {layer.op for layer in graph.layers}
    assert EXPECT.get(kind, {"lut"}) <= ops, ops
    if kind in ("dilated", "tcn1d", "mbv3"):
        assert any(layer.dilation for layer in graph.layers)
    for seed in (1, 2):
        rows = compare(path, graph, weights, random_input(graph, seed))
        worst = max(rows, key=lambda r: r["max_diff"])
        assert worst["max_diff"] <= 1, rows


# ONNX Runtime's QOperator form (QLinearMul, QLinearConcat, QLinearSigmoid,
# QLinearLeakyRelu, QLinearSoftmax, Resize on the quantized tensor), with the
# ops that have no QLinear form left in float between DQ and Q
QOPERATOR = {"dilated": "lut", "se_sigmoid": "mul", "resize_bilinear": "resize", "resize_nearest": "concat",
             "Sigmoid": "lut", "LeakyRelu": "lut", "PRelu": "lut", "Elu": "lut", "softmax": "softmax",
             "pools": "maxpool"}


@pytest.mark.parametrize("kind", sorted(QOPERATOR))
def test_qoperator_golden_within_one_lsb_of_onnx_runtime(tmp_path, kind):
    import onnx

    path = quantize(build(kind), tmp_path / f"{kind}.onnx", fmt="qoperator")
    assert any(n.op_type.startswith("QLinear") for n in onnx.load(path).graph.node)
    graph, weights = import_onnx(path, kind)
    assert graph.dialect == "qoperator" and QOPERATOR[kind] in {layer.op for layer in graph.layers}
    rows = compare(path, graph, weights, random_input(graph, 1))
    assert max(r["max_diff"] for r in rows) <= 1, rows


@pytest.mark.parametrize("kind", ["dilated", "tcn1d", "mbv3"])
def test_per_tensor_weights_within_one_lsb_of_onnx_runtime(tmp_path, kind):
    path = quantize(build(kind), tmp_path / f"{kind}.onnx", per_channel=False)
    graph, weights = import_onnx(path, kind)
    convs = [layer for layer in graph.layers if layer.weights]
    # one weight scale: every channel of a layer requantizes alike
    assert convs and all(len(set(zip(layer.requant.mul, layer.requant.shift))) == 1 for layer in convs)
    rows = compare(path, graph, weights, random_input(graph, 1))
    assert max(r["max_diff"] for r in rows) <= 1, rows


def _unsupported(kind):
    from onnx import helper
    from opgraphs import conv, model

    rng = np.random.default_rng(0)
    inits = {}
    c1 = conv(rng, inits, "c1", "input", 3, 4, 3, pad=1)
    if kind == "cubic":
        inits["roi"] = np.zeros(0, np.float32)
        inits["scales"] = np.array([1, 1, 2, 2], np.float32)
        node = helper.make_node("Resize", ["c1", "roi", "scales"], ["output"], name="up", mode="cubic")
        return model([c1, node], inits, [1, 3, 4, 4], [1, 4, 8, 8]), "up", "Resize", "use mode nearest or linear"
    if kind == "softmax_h":
        node = helper.make_node("Softmax", ["c1"], ["output"], name="sm", axis=2)
        return model([c1, node], inits, [1, 3, 4, 4], [1, 4, 4, 4]), "sm", "Softmax", "over the channels"
    if kind == "mean_c":
        node = helper.make_node("ReduceMean", ["c1"], ["output"], name="mc", axes=[1], keepdims=1)
        return model([c1, node], inits, [1, 3, 4, 4], [1, 1, 4, 4]), "mc", "ReduceMean", "spatial axes"
    raise KeyError(kind)


@pytest.mark.parametrize("kind", ["cubic", "softmax_h", "mean_c"])
def test_unsupported_forms_are_one_line_naming_the_node(tmp_path, kind):
    from tessera.errors import FrontendError

    m, node, op, fix = _unsupported(kind)
    path = quantize(m, tmp_path / f"{kind}.onnx")
    with pytest.raises(FrontendError) as err:
        import_onnx(path, kind)
    msg = str(err.value)
    assert "\n" not in msg and f"'{node}' ({op})" in msg and fix in msg, msg


def test_relu_and_clip_right_after_resize_concat_and_mean_fold_into_the_clamp(tmp_path):
    """ORT keeps Q/DQ between an op and a kept Relu/Clip; exporters may not:
    with those pairs removed (op -> Relu/Clip -> Q) the activation folds into
    the layer's clamp, and the layer still agrees with ORT within 1 LSB."""
    import onnx

    path = quantize(build("clamped"), tmp_path / "clamped.onnx")
    m = onnx.load(path)
    nodes = list(m.graph.node)
    for act in [n for n in nodes if n.op_type in ("Relu", "Clip")]:
        dq = next(n for n in nodes if n.output[0] == act.input[0])
        q = next(n for n in nodes if n.output[0] == dq.input[0])
        act.input[0] = q.input[0]
        nodes.remove(dq)
        nodes.remove(q)
        # re-center the activation's own quantization so the clamp matters
        after = next(n for n in nodes if n.op_type == "QuantizeLinear" and n.input[0] == act.output[0])
        zp = next(i for i in m.graph.initializer if i.name == after.input[2])
        zp.CopyFrom(onnx.numpy_helper.from_array(np.zeros((), np.int8), zp.name))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    folded = str(tmp_path / "folded.onnx")
    onnx.save(m, folded)
    graph, weights = import_onnx(folded, "folded")
    assert "lut" not in {layer.op for layer in graph.layers}
    clamped = {layer.op for layer in graph.layers if layer.requant.lo > -128 or layer.requant.hi < 127}
    assert {"resize", "concat", "avgpool"} <= clamped, clamped
    rows = compare(folded, graph, weights, random_input(graph, 1))
    assert max(r["max_diff"] for r in rows) <= 1, rows
