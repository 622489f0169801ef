"""Compare a firmware run with the golden model, layer by layer, and with
the peer toolchain's expected outputs when the model has a `reference:`.

The firmware prints an FNV-1a checksum of every layer's output (stored
bytes, HWC) and the final outputs in full. The first layer whose checksum
differs is the verdict's culprit; with its full output (a rerun with
dump=<layer>) the verdict names the first differing element.

Against a reference (compare_reference), on its own terms: DORY's
out_layerN files, every layer, by the checksum of the bytes the firmware
stores for them (DORY's own flow checks each layer's byte sum); Deeploy's
outputs.npz, the graph outputs the firmware prints, element by element in
the ONNX layout. The verdict is "pass" only when both comparisons pass.
"""

import hashlib
import os

import numpy as np

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619

_fnv_cache = {}


def fnv1a(data):
    # a Python loop over every byte: the golden and reference checks often
    # ask for the same bytes, so remember them by digest
    key = hashlib.sha256(data).digest()
    if key not in _fnv_cache:
        h = FNV_OFFSET
        for b in data:
            h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFF
        _fnv_cache[key] = h
    return _fnv_cache[key]


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


def compare(graph, golden, run, fused=None):
    """Verdict dict: pass/fail, per-layer match, the first failing layer.
    fused: layer name -> fused step, for the layers whose output never
    leaves L1 (not checked: the step's output, its last layer's, is)."""
    layers = []
    first_bad = None
    for i, layer in enumerate(graph.layers):
        if fused and layer.name in fused:
            got = run["layers"][i] if i < len(run["layers"]) else None
            ok = got is not None and got["name"] == layer.name
            layers.append({"name": layer.name, "match": ok, "in_l1_only": fused[layer.name]})
            if not ok and first_bad is None:
                first_bad = i
            continue
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
               "golden": "pass" if first_bad is None and outputs_ok else "fail",
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


def firmware_values(graph, run):
    """The graph outputs the firmware printed, as stored arrays (None where
    it printed none)."""
    values = {}
    for i, name in enumerate(graph.outputs):
        t = graph.tensor(name)
        data = run["outputs"].get(i)
        if data is None or len(data) != t.nbytes:
            values[name] = None
        elif t.shift:
            values[name] = (np.frombuffer(data, np.uint8).astype(np.int64) - t.shift).reshape(t.shape)
        else:
            values[name] = np.frombuffer(data, np.int8 if t.dtype == "int8" else "<i4").reshape(t.shape)
    return values


def compare_reference(graph, ref, run, fused=None):
    """The firmware's outputs against a peer toolchain's (tessera.model.reference):
    {"kind", "reference" (its folder's name), "verdict", "compared_by",
    "compared": one row per DORY file or Deeploy output (name, layer,
    elements, equal, and on a difference `first` or `error`)}. fused: as
    for compare; a DORY file of a layer whose output never leaves L1 is
    listed with `in_l1_only` and not compared (the step's output is)."""
    rows = []
    if ref.kind == "dory":
        index = {layer.name: i for i, layer in enumerate(graph.layers)}
        for name, layer, stored, error in ref.layer_values(graph):
            i = index[layer.name]
            t = graph.tensor(layer.output)
            row = {"name": name, "layer": layer.name, "elements": t.size}
            if fused and layer.name in fused:
                rows.append(dict(row, in_l1_only=fused[layer.name]))
                continue
            if error is not None:
                row.update(equal=False, error=error)
            else:
                got = run["layers"][i] if i < len(run["layers"]) else None
                row["equal"] = got is not None and got["fnv"] == fnv1a(stored_bytes(stored, t.dtype))
            rows.append(row)
        by = "checksum of every layer's output"
    else:
        values = firmware_values(graph, run)
        missing = [n for n, v in values.items() if v is None]
        if missing:
            rows = [{"name": n, "tensor": n, "equal": False, "error": "the firmware printed no such output"}
                    for n in missing]
        else:
            rows = ref.compare(graph, values)
        by = "graph outputs, element by element"
    return {"kind": ref.kind, "reference": os.path.basename(os.path.normpath(ref.folder)),
            "verdict": "pass" if rows and all(r.get("equal", True) for r in rows)
            and any("equal" in r for r in rows) else "fail",
            "compared_by": by, "compared": rows}


def first_reference_mismatch(graph, result):
    """Index of the layer of the first DORY file the firmware missed (a
    dump of it names the element), or None."""
    if result["kind"] != "dory":
        return None
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    for r in result["compared"]:
        if not r.get("equal", True) and "error" not in r:
            return index[r["layer"]]
    return None


def locate_reference(result, graph, ref, i, dump):
    """Add the first differing element (reference terms: source values,
    [h, w, c]) to the DORY row of layer i, from the layer's dumped output."""
    if dump is None:
        return result
    layer = graph.layers[i]
    for name, lay, stored, _ in ref.layer_values(graph):
        if lay.name != layer.name or stored is None:
            continue
        t = graph.tensor(layer.output)
        el = first_difference(dump, stored_bytes(stored, t.dtype), t.shape, t.dtype)
        row = next(r for r in result["compared"] if r["layer"] == layer.name)
        if el is not None:
            row["first"] = {"index": el["index"], "got": el["got"] + t.shift, "expected": el["want"] + t.shift,
                            "mismatches": el["differing"]}
    return result


def with_reference(verdict, result):
    """The verdict with the reference comparison in it: "pass" only when
    the golden model's and the reference's both pass."""
    verdict["reference"] = result
    if result["verdict"] != "pass":
        verdict["verdict"] = "fail"
    return verdict


def describe_reference(result, where):
    for r in result["compared"]:
        if r.get("equal", True):      # equal, or in L1 only (not compared)
            continue
        text = (f"{where}: {r['name']}" + (f" (layer {r['layer']})" if r.get("layer") else "")
                + f" differs from the {result['kind']} reference {result['reference']}")
        if "error" in r:
            return text + f": {r['error']}"
        f = r.get("first")
        if f:
            text += (f": first at {f['index']}, firmware {f['got']} vs reference {f['expected']}"
                     f" ({f['mismatches']} of {r['elements']} elements differ)")
        return text
    return f"{where}: the {result['kind']} reference compared nothing"


def describe(verdict, where):
    """One line saying what failed."""
    if verdict.get("golden", verdict["verdict"]) == "pass" and verdict.get("reference"):
        return describe_reference(verdict["reference"], where)
    bad = verdict.get("first_mismatch")
    if bad is None:
        return f"{where}: outputs differ from the golden model (every layer checksum matched)"
    text = f"{where}: layer {bad['index']} ({bad['layer']}) differs from the golden model"
    el = bad.get("element")
    if el:
        text += (f": first at [h, w, c] = {el['index']}, firmware {el['got']} vs golden {el['want']}"
                 f" ({el['differing']} of {el['elements']} elements differ)")
    return text
