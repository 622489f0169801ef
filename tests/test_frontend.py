"""ONNX lowering: each op in both standard dialects (QDQ and QOperator),
quantized by ONNX Runtime, checked layer by layer against ONNX Runtime; and
the errors a user sees for what cannot be lowered."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import float_model, quantize
from tessera import golden
from tessera.errors import FrontendError
from tessera.frontend import import_onnx
from tessera.golden.ortcheck import compare

rng = np.random.default_rng(0)


def w(*shape, s=0.3):
    return rng.standard_normal(shape) * s


def node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=outs[0] + "_node", **kw)


CASES = {
    # name: (nodes, initializers, input shape, output shape, expected ops)
    "conv_relu": ([node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
                   node("Relu", ["c"], ["output"])],
                  {"w": w(6, 3, 3, 3), "b": w(6, s=0.1)}, [1, 3, 9, 9], [1, 6, 5, 5], ["conv2d"]),
    "conv_asym_pad": ([node("Conv", ["input", "w", "b"], ["output"], pads=[0, 1, 2, 0], strides=[1, 2])],
                      {"w": w(4, 3, 3, 2), "b": w(4, s=0.1)}, [1, 3, 7, 8], [1, 4, 7, 4], ["conv2d"]),
    "depthwise_clip": ([node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=4),
                        node("Clip", ["c", "lo", "hi"], ["output"])],
                       {"w": w(4, 1, 3, 3), "b": w(4, s=0.1), "lo": np.array(0.0), "hi": np.array(6.0)},
                       [1, 4, 6, 6], [1, 4, 6, 6], ["depthwise"]),
    "pointwise": ([node("Conv", ["input", "w", "b"], ["output"])],
                  {"w": w(8, 4, 1, 1), "b": w(8, s=0.1)}, [1, 4, 5, 5], [1, 8, 5, 5], ["pointwise"]),
    "flatten_gemm": ([node("Flatten", ["input"], ["f"]),
                      node("Gemm", ["f", "w", "b"], ["output"], transB=1)],
                     {"w": w(5, 2 * 3 * 4), "b": w(5, s=0.1)}, [1, 2, 3, 4], [1, 5], ["linear"]),
    "matmul": ([node("Flatten", ["input"], ["f"]), node("MatMul", ["f", "w"], ["output"])],
               {"w": w(12, 7)}, [1, 12, 1, 1], [1, 7], ["linear"]),
    "add": ([node("Conv", ["input", "w", "b"], ["c"]), node("Add", ["c", "input"], ["output"])],
            {"w": w(3, 3, 1, 1), "b": w(3, s=0.1)}, [1, 3, 4, 4], [1, 3, 4, 4], ["pointwise", "add"]),
    "maxpool_pad": ([node("Conv", ["input", "w", "b"], ["c"]),
                     node("MaxPool", ["c"], ["output"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                    {"w": w(3, 3, 1, 1), "b": w(3, s=0.1)}, [1, 3, 7, 7], [1, 3, 4, 4],
                    ["pointwise", "maxpool"]),
    "avgpool": ([node("Conv", ["input", "w", "b"], ["c"]),
                 node("AveragePool", ["c"], ["output"], kernel_shape=[2, 2], strides=[2, 2])],
                {"w": w(3, 3, 1, 1), "b": w(3, s=0.1)}, [1, 3, 6, 6], [1, 3, 3, 3],
                ["pointwise", "avgpool"]),
    "global_avgpool": ([node("Conv", ["input", "w", "b"], ["c"]),
                        node("GlobalAveragePool", ["c"], ["output"])],
                       {"w": w(5, 3, 1, 1), "b": w(5, s=0.1)}, [1, 3, 6, 6], [1, 5, 1, 1],
                       ["pointwise", "avgpool"]),
}


def build(tmp_path, case, fmt, activation="int8"):
    nodes, inits, ins, outs, _ = CASES[case]
    model = float_model(nodes, inits, ins, outs)
    return quantize(model, tmp_path / f"{case}-{fmt}-{activation}.onnx", fmt, activation)


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_lowering_matches_onnx_runtime(tmp_path, case, fmt):
    path = build(tmp_path, case, fmt)
    graph, weights = import_onnx(path, case)
    assert graph.dialect == fmt
    assert [l.op for l in graph.layers] == CASES[case][4]
    for seed in range(3):
        rows = compare(path, graph, weights, golden.random_input(graph, seed))
        assert all(r["max_diff"] <= 1 for r in rows), rows


@pytest.mark.parametrize("case", ["conv_relu", "add", "maxpool_pad", "flatten_gemm"])
def test_uint8_activations_are_stored_shifted(tmp_path, case):
    path = build(tmp_path, case, "qdq", activation="uint8")
    graph, weights = import_onnx(path, case)
    assert graph.tensor(graph.inputs[0]).source_dtype == "uint8"
    assert graph.tensor(graph.inputs[0]).shift == 128
    rows = compare(path, graph, weights, golden.random_input(graph, 0))
    assert all(r["max_diff"] <= 1 for r in rows), rows


def test_check_can_fail(tmp_path):
    """The ORT comparison is a real check: a perturbed weight is caught."""
    path = build(tmp_path, "conv_relu", "qdq")
    graph, weights = import_onnx(path, "conv_relu")
    key = graph.layers[0].weights
    weights[key] = weights[key].copy()
    weights[key][0] = -weights[key][0]
    rows = compare(path, graph, weights, golden.random_input(graph, 0))
    assert rows[0]["max_diff"] > 1


def qdq_by_hand(tmp_path, middle_op):
    """Q -> DQ -> <middle_op> -> Q -> DQ, written by hand."""
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["q"], name="q0"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"], name="dq0"),
             helper.make_node(middle_op, ["dq"], ["m"], name="strange"),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["q2"], name="q1"),
             helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["output"], name="dq1")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 3, 3])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 2, 3, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path / "hand.onnx")
    onnx.save(m, path)
    return path


def test_unsupported_op_names_node_and_op(tmp_path):
    path = qdq_by_hand(tmp_path, "Cos")   # (Erf alone is a table now: islands.py)
    with pytest.raises(FrontendError) as err:
        import_onnx(path, "x")
    msg = str(err.value)
    assert "\n" not in msg and "hand.onnx" in msg and "'strange'" in msg and "Cos" in msg


def test_float_model_is_rejected(tmp_path):
    nodes, inits, ins, outs, _ = CASES["conv_relu"]
    path = str(tmp_path / "float.onnx")
    onnx.save(float_model(nodes, inits, ins, outs), path)
    with pytest.raises(FrontendError, match="not quantized.*quantize_static"):
        import_onnx(path, "x")


def test_garbage_file_is_rejected(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x08\x07this is not a model" * 10)
    with pytest.raises(FrontendError, match="junk.onnx"):
        import_onnx(str(path), "x")


def test_grouped_conv_is_rejected(tmp_path):
    model = float_model([node("Conv", ["input", "w"], ["output"], group=2)],
                        {"w": w(4, 2, 1, 1)}, [1, 4, 3, 3], [1, 4, 3, 3])
    path = quantize(model, tmp_path / "grouped.onnx")
    with pytest.raises(FrontendError, match="group=2"):
        import_onnx(path, "x")
