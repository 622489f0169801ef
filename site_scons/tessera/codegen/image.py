"""The storage level's image (storage.bin, docs/out_of_core.md): the
constants of the layers the plan put on the card, each array where the plan
says (the same bytes the C arrays would hold, little-endian), then zeros up
to the end of the room for swapped activations. The runner hands the
firmware a copy, so the build output never changes by a run."""

import numpy as np

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
        for array, _, values in weights_c.arrays(layer, graph, weights, target):
            raw = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()
            at = where["at"] + where["arrays"][array]
            data[at:at + len(raw)] = raw
    return bytes(data)


def write(path, graph, weights, the_plan, target):
    canon.write_atomic(path, image(graph, weights, the_plan, target))
