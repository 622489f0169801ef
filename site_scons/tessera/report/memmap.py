"""Every planned buffer as a rectangle over its lifetime, per memory level:
{level: {"size": bytes shown, "rects": [{name, kind, x0, x1, offset, bytes}]}},
x0..x1 the layer indices the buffer lives through (inclusive).

Activations: each tensor from the layer that writes it (the graph input from
layer 0) to the last layer that reads it (a graph output to the end).
Bounce buffers (tiles of a tensor spilled to a slower level pass through
them) for the layer that uses them. Streamed weights: each chunk in the activation level for the layer it feeds.
Tile level: each layer's input, output, weight, parameter buffers (every
copy of a double-buffered one) and its scratch, for that layer alone.
"""

KINDS = ("activation", "bounce", "weights", "in", "out", "params", "scratch")


def memory_map(graph, the_plan, tilings):
    n = len(graph.layers)
    produced = {layer.output: i for i, layer in enumerate(graph.layers)}
    last = {}
    for i, layer in enumerate(graph.layers):
        for name in layer.inputs:
            last[name] = i
    for name in graph.outputs:
        last[name] = n - 1
    out = {}
    acts = the_plan["activations"]
    rects = []
    bounces = acts.get("spill", {}).get("bounces", {})
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    for name, offset in sorted(acts["offsets"].items(), key=lambda kv: (kv[1], kv[0])):
        if name in bounces:
            # a spilled tensor's tiles pass through it during one layer
            i = index[name.split(":bounce:")[0]]
            rects.append({"name": name, "kind": "bounce", "x0": i, "x1": i, "offset": offset,
                          "bytes": bounces[name]})
            continue
        t = graph.tensor(name)
        x0 = produced.get(name, 0)
        rects.append({"name": name, "kind": "activation", "x0": x0, "x1": max(x0, last.get(name, x0)),
                      "offset": offset, "bytes": t.nbytes})
    stream = the_plan.get("weights", {}).get("stream")
    if stream and stream.get("level") == acts["level"]:
        for c in stream["chunks"]:
            i = index[c["layer"]]
            rects.append({"name": f"{c['layer']} weights [{c['c0']}, {c['c0'] + c['n']})", "kind": "weights",
                          "x0": i, "x1": i, "offset": c["at"], "bytes": c["bytes"]})
    top = max([acts.get("arena", 0)] + [r["offset"] + r["bytes"] for r in rects])
    out[acts["level"]] = {"size": top, "rects": rects}
    tiles = the_plan.get("tiles")
    if tiles:
        by_layer = {t["layer"]: t for t in tilings}
        rects = []
        for name, plan in tiles["layers"].items():
            i, sizes = index[name], by_layer[name]["l1_bytes"]
            if plan.get("direct"):      # in place: only the kernel's scratch is here
                rects.append({"name": f"{name} scratch (in place)", "kind": "scratch", "x0": i, "x1": i,
                              "offset": plan["scratch"], "bytes": plan["scratch_bytes"]})
                continue
            for kind in ("in", "out", "weights", "params"):
                offs = plan.get(kind) or []
                flat = [o for group in offs for o in (group if isinstance(group, list) else [group])]
                if not flat or not sizes.get(kind):
                    continue
                each = sizes[kind] // len(flat)
                for k, o in enumerate(flat):
                    rects.append({"name": f"{name} {kind}[{k}]", "kind": kind, "x0": i, "x1": i,
                                  "offset": o, "bytes": each})
            if sizes.get("scratch") and isinstance(plan.get("scratch"), int):
                rects.append({"name": f"{name} scratch", "kind": "scratch", "x0": i, "x1": i,
                              "offset": plan["scratch"], "bytes": sizes["scratch"]})
        level = tiles.get("level", "L1")
        out[level] = {"size": max([tiles.get("arena", 0)] + [r["offset"] + r["bytes"] for r in rects]),
                      "rects": rects}
    return out
