"""Compare a firmware run with the golden model, layer by layer.

The firmware prints an FNV-1a checksum of every layer's output (stored
bytes, HWC) and the final outputs in full. The first layer whose checksum
differs is the verdict's culprit; with its full output (a rerun with
dump=<layer>) the verdict names the first differing element.
"""

import numpy as np

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619


def fnv1a(data):
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFF
    return h


def stored_bytes(array, dtype):
    """A tensor's bytes as the firmware stores them (little-endian)."""
    return np.ascontiguousarray(np.asarray(array).astype(np.int8 if dtype == "int8" else "<i4")).tobytes()


def first_difference(got, want, shape, dtype):
    """(index (h, w, c), got value, want value) of the first differing element."""
    g = np.frombuffer(got, dtype=np.int8 if dtype == "int8" else "<i4")
    w = np.frombuffer(want, dtype=np.int8 if dtype == "int8" else "<i4")
    n = min(g.size, w.size)
    diff = np.nonzero(g[:n] != w[:n])[0]
    if diff.size == 0:
        return None
    i = int(diff[0])
    return {"index": [int(v) for v in np.unravel_index(i, shape)], "got": int(g[i]), "want": int(w[i]),
            "differing": int(diff.size), "elements": int(n)}


def compare(graph, golden, run):
    """Verdict dict: pass/fail, per-layer match, the first failing layer."""
    layers = []
    first_bad = None
    for i, layer in enumerate(graph.layers):
        t = graph.tensor(layer.output)
        want = stored_bytes(golden[layer.output], t.dtype)
        got = run["layers"][i] if i < len(run["layers"]) else None
        ok = got is not None and got["name"] == layer.name and got["fnv"] == fnv1a(want)
        layers.append({"name": layer.name, "match": ok})
        if not ok and first_bad is None:
            first_bad = i
    outputs_ok = True
    for i, name in enumerate(graph.outputs):
        t = graph.tensor(name)
        stored = np.asarray(golden[name]).astype(np.int64)
        if t.shift:
            source = (stored + t.shift).astype(np.uint8).tobytes()
        else:
            source = stored_bytes(golden[name], t.dtype)
        if run["outputs"].get(i) != source:
            outputs_ok = False
    verdict = {"verdict": "pass" if first_bad is None and outputs_ok else "fail",
               "layers": layers, "outputs_match": outputs_ok}
    if first_bad is not None:
        layer = graph.layers[first_bad]
        verdict["first_mismatch"] = {"layer": layer.name, "index": first_bad}
    return verdict


def locate(verdict, graph, golden, dump):
    """Add the first differing element of the first mismatching layer, from
    that layer's dumped output."""
    bad = verdict.get("first_mismatch")
    if bad is None or dump is None:
        return verdict
    layer = graph.layers[bad["index"]]
    t = graph.tensor(layer.output)
    bad["element"] = first_difference(dump, stored_bytes(golden[layer.output], t.dtype), t.shape, t.dtype)
    return verdict


def describe(verdict, where):
    """One line saying what failed."""
    bad = verdict.get("first_mismatch")
    if bad is None:
        return f"{where}: outputs differ from the golden model (every layer checksum matched)"
    text = f"{where}: layer {bad['index']} ({bad['layer']}) differs from the golden model"
    el = bad.get("element")
    if el:
        text += (f": first at [h, w, c] = {el['index']}, firmware {el['got']} vs golden {el['want']}"
                 f" ({el['differing']} of {el['elements']} elements differ)")
    return text
