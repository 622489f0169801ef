"""Synthetic layer chains (VGG-, AlexNet-like) as out-of-core problems, for
the scheduler's tests and measurements without a full build: 3x3 'same'
convolutions, 2x2 max pools and fully connected layers, int8, tiled from
storage through the three pools.

Storage layout: weights in region w:<layer>, one slice per output-channel
chunk (the chunk's k*k*cin weights and 4-byte biases); each activation in
region a:<layer>, chunk-major (chunk, row, column, channel in chunk) so a
tile's output is one contiguous write and a band of input rows is one read
per chunk of the producer; the network input in region `input`.

A convolution with `band: true` writes its output as storage-level row
bands (docs/out_of_core.md): its tiles walk row band first, every channel
chunk of a band writing into the band's one output buffer, the band (rows
of every channel, HWC) written once after its last tile; the next layer
reads a band of rows in one transfer.

Tiles take at most half of a pool each (so the next one can load while one
computes); a convolution keeps weights (or, when they are the smaller
traffic, input bands) resident across the other loop.
"""

from .costs import compute_cycles, cycles_to_ns


def _chunk(n, per, budget):
    """Channels per chunk: as many as fit the budget (the last chunk may be
    smaller), or None when one does not fit."""
    c = min(n, budget // per)
    return c if c >= 1 else None


def _chunks(n, cc):
    return [(j, min(cc, n - j * cc)) for j in range(-(-n // cc))]


class ChainError(ValueError):
    pass


def build_problem(layers, pools, storage, clock_hz, coefs=None, cycles_per_mac=2.0, input_shape=None):
    """The problem for a chain. layers: [{op: conv|maxpool|linear, name,
    cout (conv, linear)}], shapes inferred from input_shape (h, w, c)."""
    h, w, c = input_shape
    src = {"region": "input", "h": h, "w": w, "c": c, "chunk": c}
    out = []
    for spec in layers:
        op = spec["op"]
        if op == "conv":
            layer, src = _conv(spec, src, pools, coefs, cycles_per_mac, clock_hz)
        elif op == "maxpool":
            layer, src = _pool(spec, src, pools, coefs, cycles_per_mac, clock_hz)
        elif op == "linear":
            layer, src = _linear(spec, src, pools, coefs, cycles_per_mac, clock_hz)
        else:
            raise ChainError(f"unknown op {op}")
        out.append(layer)
    return {"storage": dict(storage), "pools": dict(pools), "layers": out}


def _band_reads(src, r0, r1):
    """Reads of rows [r0, r1) of every chunk of a chunk-major activation."""
    cp, H, W = src["chunk"], src["h"], src["w"]
    return [{"pool": "in", "region": src["region"], "offset": j * H * W * cp + r0 * W * n,
             "bytes": (r1 - r0) * W * n} for j, n in _chunks(src["c"], cp)]


def _ns(coefs, op, feats, share, cpm, clock):
    return cycles_to_ns(compute_cycles(coefs, op, feats, share, cpm), clock)


def _conv(spec, src, pools, coefs, cpm, clock):
    H, W, cin, cout = src["h"], src["w"], src["c"], spec["cout"]
    per_oc = 9 * cin + 4
    cc = _chunk(cout, per_oc, pools["w"] // 2)
    if cc is None:
        raise ChainError(f"{spec['name']}: one output channel's weights ({per_oc} B) exceed half the w pool")
    band = bool(spec.get("band"))
    # the largest band whose input (with halo) and output fit half their pools
    r = next((r for r in range(H, 0, -1) if min(H, r + 2) * W * cin <= pools["in"] // 2
              and r * W * (cout if band else cc) <= pools["out"] // 2), None)
    if r is None:
        raise ChainError(f"{spec['name']}: one output row does not fit half the in/out pools")
    bands = [(r0, min(H, r0 + r)) for r0 in range(0, H, r)]
    chunks = _chunks(cout, cc)
    w_total, in_total = cout * per_oc, H * W * cin
    weights_stationary = w_total + len(chunks) * in_total <= in_total + len(bands) * w_total
    if band:
        weights_stationary = False
    order = [(j, b) for j in chunks for b in bands] if weights_stationary else [(j, b) for b in bands for j in chunks]
    name = spec["name"]
    tiles = []
    for (j, n), (r0, r1) in order:
        a, b = max(0, r0 - 1), min(H, r1 + 1)
        reads = _band_reads(src, a, b) + [{"pool": "w", "region": f"w:{name}", "offset": j * cc * per_oc,
                                            "bytes": n * per_oc}]
        macs = (r1 - r0) * W * n * 9 * cin
        feats = {"macs": macs, "split_macs": macs, "out_elems": (r1 - r0) * W * n,
                 "in_elems": (b - a) * W * cin, "tiles": 1,
                 # the cost model's per-tile features (cost/features.py)
                 "im2col": (r1 - r0) * W * 9 * cin, "taps": (r1 - r0) * W * 9, "chans": n,
                 "tail_macs": round(macs * (n % 4) / n)}
        tile = {"reads": reads, "compute_ns": _ns(coefs, "conv2d", feats, 1 / len(order), cpm, clock),
                "writes": [{"region": f"a:{name}", "offset": j * H * W * cc + r0 * W * n, "bytes": (r1 - r0) * W * n}],
                "holds": {"in": sum(x["bytes"] for x in reads[:-1]), "w": n * per_oc, "out": (r1 - r0) * W * n}}
        if band:
            # the band's buffer, shared by its chunks; written once, by its last
            last = j == len(chunks) - 1
            tile["writes"] = [{"region": f"a:{name}", "offset": r0 * W * cout, "bytes": (r1 - r0) * W * cout}] \
                if last else []
            tile["holds"]["out"] = (r1 - r0) * W * cout
            if j:
                tile["band"] = True
        tiles.append(tile)
    return {"name": name, "op": "conv2d", "tiles": tiles}, {"region": f"a:{name}", "h": H, "w": W, "c": cout,
                                                            "chunk": cout if band else cc}


def _pool(spec, src, pools, coefs, cpm, clock):
    H, W, C, cp = src["h"], src["w"], src["c"], src["chunk"]
    Ho, Wo = H // 2, W // 2
    r = next((r for r in range(Ho, 0, -1) if 2 * r * W * cp <= pools["in"] // 2
              and r * Wo * cp <= pools["out"] // 2), None)
    if r is None:
        raise ChainError(f"{spec['name']}: one pooled row does not fit half the in/out pools")
    name = spec["name"]
    tiles = []
    count = len(_chunks(C, cp)) * -(-Ho // r)
    for j, n in _chunks(C, cp):
        for r0 in range(0, Ho, r):
            r1 = min(Ho, r0 + r)
            read = {"pool": "in", "region": src["region"], "offset": j * H * W * cp + 2 * r0 * W * n,
                    "bytes": 2 * (r1 - r0) * W * n}
            feats = {"macs": (r1 - r0) * Wo * n * 4, "split_macs": (r1 - r0) * Wo * n * 4,
                     "out_elems": (r1 - r0) * Wo * n, "in_elems": read["bytes"], "tiles": 1, "chans": n}
            tiles.append({"reads": [read], "compute_ns": _ns(coefs, "maxpool", feats, 1 / count, cpm, clock),
                          "writes": [{"region": f"a:{name}", "offset": j * Ho * Wo * cp + r0 * Wo * n,
                                      "bytes": (r1 - r0) * Wo * n}],
                          "holds": {"in": read["bytes"], "w": 0, "out": (r1 - r0) * Wo * n}})
    return {"name": name, "op": "maxpool", "tiles": tiles}, {"region": f"a:{name}", "h": Ho, "w": Wo, "c": C,
                                                             "chunk": cp}


def _linear(spec, src, pools, coefs, cpm, clock):
    cin = src["h"] * src["w"] * src["c"]
    cout = spec["cout"]
    if cin > pools["in"] // 2:
        raise ChainError(f"{spec['name']}: its {cin}-byte input does not fit half the in pool")
    per_oc = cin + 4
    cc = _chunk(cout, per_oc, pools["w"] // 2)
    cc = min(cc, pools["out"] // 2) if cc else None
    if cc is None:
        raise ChainError(f"{spec['name']}: one output's weights ({per_oc} B) exceed half the w pool")
    name = spec["name"]
    reads_in = _band_reads(src, 0, src["h"])
    tiles = []
    count = len(_chunks(cout, cc))
    for j, n in _chunks(cout, cc):
        reads = reads_in + [{"pool": "w", "region": f"w:{name}", "offset": j * cc * per_oc, "bytes": n * per_oc}]
        feats = {"macs": n * cin, "split_macs": n * cin, "out_elems": n, "in_elems": cin, "tiles": 1,
                 "chans": n, "tail_macs": cin * (n % 4)}
        tiles.append({"reads": reads, "compute_ns": _ns(coefs, "linear", feats, 1 / count, cpm, clock),
                      "writes": [{"region": f"a:{name}", "offset": j * cc, "bytes": n}],
                      "holds": {"in": cin, "w": n * per_oc, "out": n}})
    return {"name": name, "op": "linear", "tiles": tiles}, {"region": f"a:{name}", "h": 1, "w": 1, "c": cout,
                                                            "chunk": cc}


def vgg16(size=64, classes=1000):
    """VGG-16's layers at size x size x 3 (13 convolutions, 5 pools, 3 FC)."""
    layers = []
    for b, (n, c) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)], 1):
        layers += [{"op": "conv", "name": f"block{b}_conv{i}", "cout": c} for i in range(1, n + 1)]
        layers.append({"op": "maxpool", "name": f"block{b}_pool"})
    layers += [{"op": "linear", "name": "fc1", "cout": 4096}, {"op": "linear", "name": "fc2", "cout": 4096},
               {"op": "linear", "name": "fc3", "cout": classes}]
    return layers, (size, size, 3)


def alexnet_like(size=48, classes=1000, fc=4096):
    """AlexNet's shape at size x size (3x3 convolutions standing in for its
    11x11 and 5x5 ones): five convolutions, three pools, three large FC."""
    layers = [{"op": "conv", "name": "conv1", "cout": 64}, {"op": "maxpool", "name": "pool1"},
              {"op": "conv", "name": "conv2", "cout": 192}, {"op": "maxpool", "name": "pool2"},
              {"op": "conv", "name": "conv3", "cout": 384}, {"op": "conv", "name": "conv4", "cout": 256},
              {"op": "conv", "name": "conv5", "cout": 256}, {"op": "maxpool", "name": "pool5"},
              {"op": "linear", "name": "fc6", "cout": fc}, {"op": "linear", "name": "fc7", "cout": fc},
              {"op": "linear", "name": "fc8", "cout": classes}]
    return layers, (size, size, 3)
