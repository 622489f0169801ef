"""The largest values of an output (a classifier's top classes), for the
report and the reference runtimes' checks: [[index, value], ...], largest
first, ties to the lower index."""

import numpy as np


def top(values, k=5):
    flat = np.asarray(values).reshape(-1).astype(np.int64)
    order = np.argsort(-flat, kind="stable")[:k]
    return [[int(i), int(flat[i])] for i in order]


def model_values(graph, name, stored):
    """A graph tensor's stored values (HWC, uint8 less 128) as the model
    gives them: its own type, channel first for an ONNX model."""
    t = graph.tensor(name)
    values = np.asarray(stored).astype(np.int64) + t.shift
    if t.source_layout != "hwc" and graph.dialect != "tflite" and values.ndim == 3:
        values = values.transpose(2, 0, 1)
    return values
