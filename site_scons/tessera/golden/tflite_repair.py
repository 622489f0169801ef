"""Harmless metadata faults of a .tflite file, repaired in memory before the
TFLite interpreter reads it.

TFLite Micro's own `person_detect.tflite` stores quantized_dimension 3 on
its one-dimensional bias tensors (one scale per output channel, their only
axis): the interpreter's verifier refuses it ("quantized_dimension must be
in range [0, 1). Was 3."), TFLite Micro runs it (its kernels never read a
bias's quantization: the bias is already in the accumulator's scale). A quantized dimension beyond
the tensor's rank can only mean one axis: the single axis as long as the
scales (or any, with one scale), so setting it to 0 changes no value the
model computes. That is the one fault repaired here, on a copy in memory
(the user's file is not touched);
each repair is one line in the build's output and in report.json (`intake`),
and the interpreter then checks every tensor as for any model.
"""

import numpy as np

# QuantizationParameters' field 6 (quantized_dimension): vtable slot 4 + 2 * 6
_QDIM_SLOT = 16


def repair(path):
    """(model bytes, [one line per repair]) of the .tflite file at path."""
    import tflite

    with open(path, "rb") as f:
        buf = bytearray(f.read())
    notes = []
    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        subgraphs = [model.Subgraphs(k) for k in range(model.SubgraphsLength())]
    except Exception:
        return bytes(buf), notes        # not readable: the interpreter's gate says why
    for sg in subgraphs:
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            q = t.Quantization()
            if q is None:
                continue
            dim = q.QuantizedDimension()
            shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
            if 0 <= dim < max(len(shape), 1):
                continue
            # the dimension the scales can only mean: any with one scale, else the one axis as long
            axes = [a for a, n in enumerate(shape) if n == q.ScaleLength()]
            if q.ScaleLength() > 1 and axes != [0]:
                continue
            what = ("a per-tensor quantization (one scale) set to 0 (with one scale it selects nothing)"
                    if q.ScaleLength() <= 1 else
                    f"a {len(shape)}-dimensional tensor with {q.ScaleLength()} scales set to 0 (its only "
                    f"axis of {q.ScaleLength()} values)")
            where = q._tab.Offset(_QDIM_SLOT)
            if not where:
                continue
            pos = q._tab.Pos + where
            buf[pos:pos + 4] = np.int32(0).tobytes()
            name = (t.Name() or b"").decode(errors="replace")
            notes.append(f"tensor {i} ({name!r}): quantized_dimension {dim} of {what}, as TFLite Micro reads it")
    return bytes(buf), notes
