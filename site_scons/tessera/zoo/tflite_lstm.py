"""Int8 TFLite models of one UNIDIRECTIONAL_SEQUENCE_LSTM (integer 8x8_16:
int8 input, weights and hidden state, int16 cell state) with seeded random
weights, written straight as a flatbuffer with the `tflite` package's
builder functions (no TensorFlow): the shapes and the options TensorFlow's
converter does not let one pick at will (no input gate, peephole,
projection, clips, time-major) for tests against the TFLite interpreter,
and the cost model's sweeps of the recurrent step.

    write(path, steps=8, inputs=10, cells=16, outputs=None, cifg=False,
          peephole=False, projection=False, cell_clip=0.0, proj_clip=0.0,
          time_major=False, seed=0)

The quantization follows TFLite's int8 LSTM: per-tensor symmetric weights,
int32 biases at the input scale times the weight scale, a power-of-two
cell state scale (2^-11), int16 peephole weights, the gates' intermediates
unquantized (Q3.12 without layer norm) and the hidden one at the output's
scale. The interpreter runs what it refuses to prepare never: a test runs
the file through it first.
"""

import flatbuffers
import numpy as np

INT8, INT16, INT32, FLOAT32 = 9, 7, 2, 0
LSTM_CODE = 44          # BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
OPTIONS_TYPE = 71       # BuiltinOptions.UnidirectionalSequenceLSTMOptions
TANH = 4


def _vector(builder, start, values, kind):
    start(builder, len(values))
    for v in reversed(values):
        getattr(builder, kind)(v)
    return builder.EndVector()


def write(path, steps=8, inputs=10, cells=16, outputs=None, cifg=False, peephole=False, projection=False,
          cell_clip=0.0, proj_clip=0.0, time_major=False, seed=0):
    import importlib

    # the modules (the package's names are the classes)
    Buf, Mod, Op, Code, Q, Sub, Ten, Opt = (importlib.import_module(f"tflite.{m}") for m in (
        "Buffer", "Model", "Operator", "OperatorCode", "QuantizationParameters", "SubGraph", "Tensor",
        "UnidirectionalSequenceLSTMOptions"))

    rng = np.random.default_rng(seed)
    outputs = outputs if projection else cells
    outputs = outputs or cells
    b = flatbuffers.Builder(1 << 16)
    buffers = [b""]          # buffer 0: empty, the activations'
    tensors = []             # (name, shape, type, buffer, scale, zero point, variable)

    def tensor(name, shape, typ, data=None, scale=None, zp=0, variable=False):
        buf = 0
        if data is not None:
            buffers.append(np.ascontiguousarray(data).tobytes())
            buf = len(buffers) - 1
        tensors.append((name, list(shape), typ, buf, scale, zp, variable))
        return len(tensors) - 1

    s_x, zp_x = 0.05, int(rng.integers(-20, 20))
    s_h, zp_h = 1.0 / 128, int(rng.integers(-5, 5))
    s_c = 2.0 ** -11
    w_scale = lambda: float(rng.uniform(0.004, 0.012))   # noqa: E731

    def weights(name, rows, cols):
        return tensor(name, [rows, cols], INT8, rng.integers(-127, 128, (rows, cols)).astype(np.int8), w_scale())

    ins = [-1] * 24
    if time_major:
        ins[0] = tensor("input", [steps, 1, inputs], INT8, scale=s_x, zp=zp_x)
    else:
        ins[0] = tensor("input", [1, steps, inputs], INT8, scale=s_x, zp=zp_x)
    gates = "fgo" if cifg else "ifgo"
    index = {"i": 0, "f": 1, "g": 2, "o": 3}
    for g in gates:
        ins[1 + index[g]] = weights(f"input_to_{g}", cells, inputs)
    for g in gates:
        ins[5 + index[g]] = weights(f"recurrent_to_{g}", cells, outputs)
    if peephole:
        for g in "ifo":
            if g in gates:
                ins[9 + {"i": 0, "f": 1, "o": 2}[g]] = tensor(
                    f"cell_to_{g}", [cells], INT16, rng.integers(-20000, 20000, cells).astype(np.int16),
                    float(rng.uniform(1e-5, 5e-5)))
    for g in gates:
        s_w = tensors[ins[1 + index[g]]][4]
        ins[12 + index[g]] = tensor(f"{g}_bias", [cells], INT32,
                                    rng.integers(-3000, 3000, cells).astype(np.int32), s_x * s_w)
    if projection:
        ins[16] = weights("projection", outputs, cells)
        ins[17] = tensor("projection_bias", [outputs], INT32, rng.integers(-500, 500, outputs).astype(np.int32),
                         s_h * tensors[ins[16]][4])
    ins[18] = tensor("output_state", [1, outputs], INT8, scale=s_h, zp=zp_h, variable=True)
    ins[19] = tensor("cell_state", [1, cells], INT16, scale=s_c, zp=0, variable=True)
    inter = [tensor(f"{g}_intermediate", [0], FLOAT32) for g in "ifco"]
    inter.append(tensor("effective_hidden_scale_intermediate", [0], INT8, scale=s_h, zp=zp_h))
    out = tensor("output", [steps, 1, outputs] if time_major else [1, steps, outputs], INT8, scale=s_h, zp=zp_h)

    # ---- serialize (children before parents, as flatbuffers wants) ----
    buf_offsets = []
    for data in buffers:
        dv = b.CreateByteVector(data) if data else None
        Buf.BufferStart(b)
        if dv is not None:
            Buf.BufferAddData(b, dv)
        buf_offsets.append(Buf.BufferEnd(b))
    ten_offsets = []
    for name, shape, typ, buf, scale, zp, variable in tensors:
        nm = b.CreateString(name)
        sh = _vector(b, Ten.TensorStartShapeVector, shape, "PrependInt32")
        q = None
        if scale is not None:
            sc = _vector(b, Q.QuantizationParametersStartScaleVector, [float(scale)], "PrependFloat32")
            z = _vector(b, Q.QuantizationParametersStartZeroPointVector, [int(zp)], "PrependInt64")
            Q.QuantizationParametersStart(b)
            Q.QuantizationParametersAddScale(b, sc)
            Q.QuantizationParametersAddZeroPoint(b, z)
            q = Q.QuantizationParametersEnd(b)
        Ten.TensorStart(b)
        Ten.TensorAddShape(b, sh)
        Ten.TensorAddType(b, typ)
        Ten.TensorAddBuffer(b, buf)
        Ten.TensorAddName(b, nm)
        if q is not None:
            Ten.TensorAddQuantization(b, q)
        Ten.TensorAddIsVariable(b, variable)
        ten_offsets.append(Ten.TensorEnd(b))
    Opt.UnidirectionalSequenceLSTMOptionsStart(b)
    Opt.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, TANH)
    Opt.UnidirectionalSequenceLSTMOptionsAddCellClip(b, float(cell_clip))
    Opt.UnidirectionalSequenceLSTMOptionsAddProjClip(b, float(proj_clip))
    Opt.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, time_major)
    opts = Opt.UnidirectionalSequenceLSTMOptionsEnd(b)
    op_ins = _vector(b, Op.OperatorStartInputsVector, ins, "PrependInt32")
    op_outs = _vector(b, Op.OperatorStartOutputsVector, [out], "PrependInt32")
    op_inter = _vector(b, Op.OperatorStartIntermediatesVector, inter, "PrependInt32")
    Op.OperatorStart(b)
    Op.OperatorAddOpcodeIndex(b, 0)
    Op.OperatorAddInputs(b, op_ins)
    Op.OperatorAddOutputs(b, op_outs)
    Op.OperatorAddBuiltinOptionsType(b, OPTIONS_TYPE)
    Op.OperatorAddBuiltinOptions(b, opts)
    Op.OperatorAddIntermediates(b, op_inter)
    op = Op.OperatorEnd(b)
    t_vec = _vector(b, Sub.SubGraphStartTensorsVector, ten_offsets, "PrependUOffsetTRelative")
    i_vec = _vector(b, Sub.SubGraphStartInputsVector, [ins[0]], "PrependInt32")
    o_vec = _vector(b, Sub.SubGraphStartOutputsVector, [out], "PrependInt32")
    ops_vec = _vector(b, Sub.SubGraphStartOperatorsVector, [op], "PrependUOffsetTRelative")
    sg_name = b.CreateString("main")
    Sub.SubGraphStart(b)
    Sub.SubGraphAddTensors(b, t_vec)
    Sub.SubGraphAddInputs(b, i_vec)
    Sub.SubGraphAddOutputs(b, o_vec)
    Sub.SubGraphAddOperators(b, ops_vec)
    Sub.SubGraphAddName(b, sg_name)
    sg = Sub.SubGraphEnd(b)
    Code.OperatorCodeStart(b)
    Code.OperatorCodeAddDeprecatedBuiltinCode(b, LSTM_CODE)
    Code.OperatorCodeAddBuiltinCode(b, LSTM_CODE)
    Code.OperatorCodeAddVersion(b, 1)
    code = Code.OperatorCodeEnd(b)
    codes = _vector(b, Mod.ModelStartOperatorCodesVector, [code], "PrependUOffsetTRelative")
    sgs = _vector(b, Mod.ModelStartSubgraphsVector, [sg], "PrependUOffsetTRelative")
    bufs = _vector(b, Mod.ModelStartBuffersVector, buf_offsets, "PrependUOffsetTRelative")
    desc = b.CreateString("tessera.zoo.tflite_lstm")
    Mod.ModelStart(b)
    Mod.ModelAddVersion(b, 3)
    Mod.ModelAddOperatorCodes(b, codes)
    Mod.ModelAddSubgraphs(b, sgs)
    Mod.ModelAddDescription(b, desc)
    Mod.ModelAddBuffers(b, bufs)
    b.Finish(Mod.ModelEnd(b), file_identifier=b"TFL3")
    with open(path, "wb") as f:
        f.write(b.Output())
    return path
