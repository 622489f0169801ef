"""Static QDQ quantization with ONNX Runtime, made reproducible.

`quantize(float_model, q)` runs `onnxruntime.quantization.quantize_static`
the way a user would (QDQ format, int8 activations, int8 symmetric weights,
per channel unless told otherwise, MinMax calibration over seeded random
inputs) inside a temporary directory it removes, then normalizes the result
so the same arguments give the same bytes.
"""

import logging
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)

from ..util.version import __version__


def random_inputs(shape, count, seed):
    """`count` standard-normal float32 arrays of `shape` (the calibration data).

    Also the distribution the float model's simulated batch-norm was fitted
    on, so test inputs drawn from here are "in distribution".
    """
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]


class RandomDataReader(CalibrationDataReader):
    """Feeds `random_inputs(...)` to the calibrator as {"input": array}."""

    def __init__(self, shape, count, seed):
        self._feeds = [{"input": x} for x in random_inputs(shape, count, seed)]
        self._next = 0

    def get_next(self):
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self):
        self._next = 0


class _DropPreprocessHint(logging.Filter):
    """ORT nags about its pre-processing step on every call. Our float models
    are already what it would produce (batch-norm folded, shapes static, no
    redundant ops), so the hint is noise in a build log."""

    def filter(self, record):
        return "pre-processing" not in record.getMessage()


def quantize(float_model, q):
    """The QDQ ModelProto for float_model and quantization parameters q.

    Calibration: q["calibration_samples"] standard-normal inputs from
    default_rng(q["seed"]), MinMax ranges. Activations are int8 asymmetric
    (ORT's default for static QDQ), weights int8 symmetric.
    """
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    reader = RandomDataReader(shape, q["calibration_samples"], q["seed"])
    tmp = tempfile.mkdtemp(prefix="tessera-zoo-")
    hint = _DropPreprocessHint()
    logging.getLogger().addFilter(hint)
    try:
        src = os.path.join(tmp, "float.onnx")
        dst = os.path.join(tmp, "qdq.onnx")
        onnx.save(float_model, src)
        quantize_static(
            src,
            dst,
            reader,
            quant_format=QuantFormat.QDQ,
            per_channel=q["per_channel"],
            reduce_range=False,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False},
        )
        model = onnx.load(dst)
    finally:
        logging.getLogger().removeFilter(hint)
        shutil.rmtree(tmp, ignore_errors=True)
    # Nothing of the temporary directories (ours or ORT's "ort.quant.*") may
    # leak into the file, or the bytes would change from run to run.
    data = model.SerializeToString()
    for leak in (tmp.encode(), b"ort.quant."):
        if leak in data:
            raise RuntimeError(f"quantized model mentions a temporary path ({leak!r})")
    return model


def normalize(model, metadata):
    """Make the quantized model's provenance fields deterministic and ours.

    ORT writes producer "onnx.quantize" / its quantizer version and a
    metadata entry "onnx.infer"; those are stable, but we state the producer
    ourselves (so a different ORT cannot silently change it) and record the
    generator/quantization parameters and the ORT version as metadata, in
    sorted order. Doc strings are cleared.
    """
    model.producer_name = "tessera.zoo"
    model.producer_version = __version__
    model.domain = ""
    model.model_version = 0
    model.doc_string = ""
    model.graph.doc_string = ""
    entries = {p.key: p.value for p in model.metadata_props}
    entries.update(metadata)
    entries["tessera.zoo.quantizer"] = f"onnxruntime {onnxruntime.__version__}"
    del model.metadata_props[:]
    for key in sorted(entries):
        model.metadata_props.add(key=key, value=entries[key])
    return model
