#!/usr/bin/env python3
"""The operator status tables of docs/operators.md: every TFLite builtin
operator (the `tflite` package's BuiltinOperator, TFLite's schema) and every
operator of ONNX's default domain (onnx.defs), each with what tessera makes
of it, or `-` when it is not supported (the import then stops with one line
naming the file, the node and the operator).

    .venv/bin/python tools/operators_doc.py          # rewrite the tables in docs/operators.md
    .venv/bin/python tools/operators_doc.py --check  # exit 1 when they are out of date

The supported sets come from the importers themselves (the TFLite parser's
handler table, the QDQ and QOperator parsers' op lists), so a new lowering
shows up here, or the check fails.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
DOC = os.path.join(ROOT, "docs", "operators.md")
BEGIN, END = "<!-- operator status: tools/operators_doc.py -->", "<!-- end of operator status -->"

# what each supported TFLite operator becomes (the handler table decides which are supported)
TFLITE = {
    "ADD": "add (TFLite's per-input rescale); of a constant: a table",
    "ARG_MAX": "argmax over channels at the output; elsewhere: post-processing left to the application",
    "AVERAGE_POOL_2D": "avgpool (rounded division; uint8 raw sums)",
    "CAST": "a raw uint8 input read by CAST + QUANTIZE: a table; elsewhere post-processing",
    "CONCATENATION": "concat (int8 or uint8 sharing the output's parameters)",
    "CONV_2D": "conv2d / pointwise (int8; TF1 uint8 weights with a weight offset)",
    "DEPTHWISE_CONV_2D": "depthwise (any depth multiplier; uint8 weights with a weight offset)",
    "DEQUANTIZE": "the network's end at a float output; elsewhere post-processing",
    "EXPAND_DIMS": "data movement (a view)",
    "FILL": "a constant (folded at import)",
    "FULLY_CONNECTED": "linear (a permuted input permutes the weights)",
    "GATHER": "data movement: a gather along one axis (constant indices)",
    "HARD_SWISH": "lut (TFLite's 16-bit recipe)",
    "LEAKY_RELU": "lut (QuantizeLeakyRelu)",
    "LOGISTIC": "lut (the interpreter's float table)",
    "MAXIMUM": "lut: of a constant, or of a table's input and output (PReLU)",
    "MAX_POOL_2D": "maxpool",
    "MEAN": "avgpool over H and/or W (QuantizedMeanOrSum's multiplier)",
    "MINIMUM": "lut: of a constant, or of a table's input and output",
    "MUL": "mul (broadcast); of a constant: a table (scalar or per channel) or a 1x1 depthwise (over the image)",
    "PACK": "data movement of one tensor's pieces; of constants: a constant",
    "PAD": "folded into a convolution, a padding layer, or (channels) a gather with a fill",
    "PADV2": "as PAD",
    "QUANTIZE": "at a float input: the start; int8/uint8 requantization: avgpool 1x1",
    "RELU": "folded, or avgpool 1x1 (ReluX)",
    "RELU6": "folded, or avgpool 1x1 (ReluX)",
    "RELU_N1_TO_1": "folded, or avgpool 1x1 (ReluX)",
    "RESHAPE": "data movement: nothing, or a reshape where a layer needs the new shape",
    "RESIZE_BILINEAR": "resize (int8: ResizeBilinearInteger; uint8 is computed in float by TFLite: refused)",
    "RESIZE_NEAREST_NEIGHBOR": "resize with a nearest table",
    "SHAPE": "a constant (folded at import)",
    "SLICE": "data movement",
    "SOFTMAX": "softmax (TFLite's fixed point, up to 4095 values)",
    "SPLIT": "data movement: a gather per piece",
    "SPLIT_V": "data movement: a gather per piece",
    "SQUEEZE": "data movement (a view)",
    "STRIDED_SLICE": "data movement (begin, end, strides and their masks)",
    "SUB": "of a constant: a table",
    "TANH": "lut (the interpreter's float table)",
    "TILE": "data movement (a nearest upsampling's rows and columns)",
    "TRANSPOSE": "data movement: transpose, folded into a mean or a fully connected layer where exact",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "lstm: TFLite's integer step (int16 cell; no input gate, peephole, projection, clips)",
    "UNPACK": "data movement",
}

# ONNX (QDQ islands; QOperator ops are the com.microsoft domain's)
ONNX = {
    "Abs": "in an elementwise island: one table with its neighbours",
    "Add": "add (broadcast by a [1, 1, C] vector tiled); of a constant on tokens (bias, positional embedding): "
           "a 1x1 depthwise",
    "AveragePool": "avgpool (1x1: a requantization)",
    "Clip": "folded into the layer before, or lut",
    "Concat": "concat (channel first, or a head's [1, N, k] as it is)",
    "Conv": "conv2d / depthwise / pointwise (1D and 2D, dilated; LeakyRelu folded)",
    "DequantizeLinear": "quantized values",
    "Div": "in an elementwise island (GELU's x / sqrt(2)): one table",
    "Elu": "lut",
    "Erf": "in an elementwise island (GELU): one table",
    "Flatten": "a view",
    "GRU": "lstm (cell onnx_gru: the states in fixed point, gemmlowp's 32-bit logistic and tanh)",
    "Gemm": "linear",
    "GlobalAveragePool": "avgpool",
    "GlobalMaxPool": "maxpool",
    "HardSigmoid": "lut",
    "HardSwish": "lut",
    "Identity": "a view",
    "LSTM": "lstm (cell onnx_lstm: the states in fixed point, gemmlowp's 32-bit logistic and tanh)",
    "LayerNormalization": "layernorm over the last axis (integer, mode int)",
    "LeakyRelu": "lut, or folded into the Conv before it",
    "MatMul": "linear / pointwise on tokens (by a constant); matmul (of two activations: attention)",
    "Max": "lut (of a constant)",
    "MaxPool": "maxpool",
    "Min": "lut (of a constant)",
    "Mul": "mul (broadcast); by a constant scalar: a 1x1 depthwise",
    "Neg": "in an elementwise island: one table",
    "PRelu": "lut (per channel)",
    "Pow": "in an elementwise island (tanh-GELU's x^3): one table",
    "Pad": "folded into a convolution, or a padding layer",
    "QuantizeLinear": "quantized values (Q -> DQ -> Q: a requantization)",
    "ReduceMean": "avgpool over the spatial axes, or over the tokens",
    "Relu": "folded into the layer before, or lut",
    "Reshape": "a view, or data movement",
    "Resize": "resize (nearest, linear)",
    "Sigmoid": "lut",
    "Softmax": "softmax (channels, or the last axis: attention's scores, a head's classes)",
    "Split": "data movement: a gather per piece",
    "Sqrt": "in an elementwise island: one table",
    "Squeeze": "a view",
    "Sub": "in an elementwise island: one table",
    "Tanh": "lut",
    "Transpose": "data movement (or folded: input permutes, a flatten into a fully connected layer)",
    "Unsqueeze": "a view",
    "Upsample": "resize",
}


def tflite_supported():
    from tessera.frontend.tflite import TfliteParser

    parser = TfliteParser.__new__(TfliteParser)
    return set(parser._handlers())


def onnx_supported():
    from tessera.frontend.onnxgraph import VIEW_OPS
    from tessera.frontend.qdq import CLAMP_OPS, COMPUTE_OPS, ISLAND_OPS, LUT_OPS

    return set(COMPUTE_OPS) | set(LUT_OPS) | set(CLAMP_OPS) | set(VIEW_OPS) | set(ISLAND_OPS) | {
        "QuantizeLinear", "DequantizeLinear", "Transpose", "Split"}


def qoperator_supported():
    from tessera.frontend.qoperator import QOperatorParser

    return sorted(n[3:] for n in dir(QOperatorParser) if n.startswith("op_QLinear") or n == "op_QGemm")


def tables():
    import onnx
    import tflite

    tfl_all = sorted(k for k in vars(tflite.BuiltinOperator) if not k.startswith("_"))
    onnx_all = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == ""})
    from tessera.frontend.qdq import LUT_OPS

    tfl_yes, onnx_yes = tflite_supported(), onnx_supported()
    # a float function between DQ and Q (qdq.LUT_OPS) is a table unless said otherwise
    onnx_text = dict({n: "lut" for n in LUT_OPS}, **ONNX)
    missing = (tfl_yes - set(TFLITE)) | (onnx_yes - set(onnx_text))
    if missing:
        raise SystemExit(f"tools/operators_doc.py: no status text for {sorted(missing)}")
    lines = [BEGIN, "", f"### TFLite builtin operators ({len(tfl_yes & set(tfl_all))} of {len(tfl_all)})", "",
             "| operator | tessera |", "|---|---|"]
    lines += [f"| {n} | {TFLITE[n] if n in tfl_yes else '-'} |" for n in tfl_all]
    lines += ["", f"### ONNX operators, default domain ({len(onnx_yes & set(onnx_all))} of {len(onnx_all)}; "
                  "in QDQ islands)", "", "| operator | tessera |", "|---|---|"]
    lines += [f"| {n} | {onnx_text[n] if n in onnx_yes else '-'} |" for n in onnx_all]
    lines += ["", "ONNX Runtime's QOperator ops (com.microsoft, and the QLinearConv/QLinearMatMul of the default "
                  "domain): " + ", ".join(qoperator_supported()) + "; float ops ONNX Runtime leaves between "
                  "DequantizeLinear and QuantizeLinear as in QDQ.", "", END]
    return "\n".join(lines)


def main(argv):
    with open(DOC) as f:
        text = f.read()
    new = tables()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        updated = head + new + tail
    else:
        updated = text.rstrip("\n") + "\n\n## Every operator\n\n" + new + "\n"
    if "--check" in argv:
        if updated != text:
            print("docs/operators.md: the operator tables are out of date (run tools/operators_doc.py)")
            return 1
        return 0
    with open(DOC, "w") as f:
        f.write(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
