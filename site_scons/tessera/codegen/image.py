"""The storage level's image (storage.bin, docs/out_of_core.md): the
constants of the layers the plan put on the card, each array where the plan
says (the same bytes the C arrays would hold, little-endian), then zeros up
to the end of the room for swapped activations. The runner hands the
firmware a copy, so the build output never changes by a run."""

import numpy as np

from ..tiles.geometry import split_blocks
from ..util import canon
from . import weights as weights_c


def image(graph, weights, the_plan, target):
    """The image's bytes."""
    stored = the_plan["weights"].get("storage", {"layers": {}, "bytes": 0})
    end = stored["bytes"]
    spill = the_plan["activations"].get("spill")
    if spill is not None and spill["level"] == target["storage"]["level"]:
        end = max(end, spill["bytes"])
    data = bytearray(end)
    for name, where in stored["layers"].items():
        layer = graph.layer(name)
        arrays = {array: np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<"))
                  for array, _, values in weights_c.arrays(layer, graph, weights, target)}
        if "split" in where:
            _split_layer(data, where, arrays, graph.tensor(layer.output).shape[2])
            continue
        for array, values in arrays.items():
            raw = values.tobytes()
            at = where["at"] + where["arrays"][array]
            data[at:at + len(raw)] = raw
    return bytes(data)


def _split_layer(data, where, arrays, cout):
    """A split layer's constants in the order its steps stream them
    (tessera.tiles.geometry.split_blocks): per channel tile its parameter
    rows, then per reduction chunk its weights [oc][window][kc]."""
    sp = where["split"]
    w = arrays["weights"].reshape(cout, sp["window"], -1)
    params = [(name, v.reshape(cout, -1).view(np.int8)) for name, v in arrays.items() if name != "weights"]
    blocks, _ = split_blocks(cout, sp["c"], sp["chunks"], sp["window"],
                             [(name, v.shape[1]) for name, v in params])
    for b in blocks:
        rows = slice(b["oc0"], b["oc0"] + b["oc"])
        for name, v in params:
            raw = v[rows].tobytes()
            at = where["at"] + b["params"][name]
            data[at:at + len(raw)] = raw
        for at, (k0, kc) in zip(b["chunks"], sp["chunks"]):
            raw = np.ascontiguousarray(w[rows, :, k0:k0 + kc]).tobytes()
            data[where["at"] + at:where["at"] + at + len(raw)] = raw


def write(path, graph, weights, the_plan, target):
    canon.write_atomic(path, image(graph, weights, the_plan, target))
