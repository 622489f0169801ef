#!/usr/bin/env python3
"""GVSoC kernel benchmark (not a test): single calls of the PULP-NN-style
kernels on pulp-open's 8-core cluster, shapes taken from mbv1_025_128's
layers, each with the Xpulpv2 path and with the portable path, checked
against the golden model. Per call: the cycles of the call (fork to join),
MAC/cycle, and core 0's performance counters (instructions, load stalls,
cycles waiting for instruction fetches, cycles lost to TCDM contention),
which show where a kernel's time goes.

    .venv/bin/python benchmarks/pulp_nn_kernels.py [--model mbv1_025_128|mbv1_128|chw]

Operands, arguments and constants sit in L1, as a layer's tiles do. The
firmware is tests/test_pulp_nn_gvsoc.py's with its `perf` switch. Needs
GVSoC (docs/gvsoc.md).
"""

import argparse
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "site_scons"), os.path.join(ROOT, "tests")]

S1 = dict(kh=3, kw=3, sh=1, sw=1, pad=(1, 1, 1, 1))
S2 = dict(kh=3, kw=3, sh=2, sw=2, pad=(0, 0, 1, 1))
POOL4 = dict(kh=4, kw=4, sh=1, sw=1, pad=(0, 0, 0, 0))


def cases(T, model):
    """(label, case, MACs) of the model's shapes."""
    out = [] if model != "mbv1_025_128" else [
        ("depthwise 8x8x128 3x3/1 (dw7-dw11)", T.case("depthwise", 1, (8, 8, 128), 128, "f32", 8, S1)),
        ("depthwise 32x32x8 3x3/1 (one channel per core)", T.case("depthwise", 2, (32, 32, 8), 128, "f32", 8, S1)),
        ("depthwise 16x16x64 3x3/2", T.case("depthwise", 3, (16, 16, 64), 128, "f32", 8, S2)),
        ("conv2d 9x65x3 -> 4x32x8 3x3/2 (conv0 tile)", T.case("conv2d", 4, (9, 65, 3, 8), -2, "net", 8, S2)),
        ("pointwise 8x8x128 -> 128 (pw7-pw11)", T.case("pointwise", 5, (8, 8, 128, 128), 128, "net", 8, fold=True)),
        ("pointwise 16x16x8 -> 16 (pw1 tile)", T.case("pointwise", 6, (16, 16, 8, 16), 128, "net", 8, fold=True)),
        ("linear 256 -> 96 (fc tile)", T.case("linear", 7, (1, 1, 256, 96), 128, "net", 8, fold=True)),
        ("avgpool 4x4x256 global (pool)", T.case("avgpool", 12, (4, 4, 256), 128, "net", 8, POOL4)),
    ]
    if model == "mbv1_128":   # 1.0-MobileNetV1-128 on pulp_open_hyper: its tiles
        out = [
        ("pointwise 8x2x512 -> 36 (mbv1_128 pw7 tile)", T.case("pointwise", 8, (8, 2, 512, 36), 128, "net", 8, fold=True)),
        ("pointwise 4x64x32 -> 64 (mbv1_128 pw1 tile)", T.case("pointwise", 9, (4, 64, 32, 64), 128, "net", 8, fold=True)),
        ("depthwise 8x8x192 3x3/1 (mbv1_128 dw7 tile)", T.case("depthwise", 10, (8, 8, 192), 128, "f32", 8, S1)),
        ("linear 1024 -> 24 (mbv1_128 fc tile)", T.case("linear", 11, (1, 1, 1024, 24), 128, "net", 8, fold=True)),
        ]
    if model == "chw":   # the depthwise tiles of both networks, HWC input against channel-major
        shapes = [("8x8x128 3x3/1", (8, 8, 128), S1), ("4x4x256 3x3/1", (4, 4, 256), S1),
                  ("8x8x192 3x3/1", (8, 8, 192), S1), ("32x32x8 3x3/1", (32, 32, 8), S1),
                  ("7x64x32 3x3/1 pad 0,1,0,1", (7, 64, 32), dict(S1, pad=(0, 1, 0, 1))),
                  ("16x16x64 3x3/2", (16, 16, 64), S2),
                  ("5x64x64 3x3/2 pad 0,0,0,1", (5, 64, 64), dict(S2, pad=(0, 0, 0, 1))),
                  ("9x17x64 3x3/2 pad 0,0,0,1", (9, 17, 64), dict(S2, pad=(0, 0, 0, 1))),
                  # mbv1_128's stride-2 tiles, padded on the top and left (dw2, dw6, dw12)
                  ("5x64x64 3x3/2 pad 0,1,0,0", (5, 64, 64), dict(S2, pad=(0, 1, 0, 0))),
                  ("16x16x80 3x3/2 pad 1,1,0,0", (16, 16, 80), dict(S2, pad=(1, 1, 0, 0))),
                  ("8x8x256 3x3/2 pad 1,1,0,0", (8, 8, 256), dict(S2, pad=(1, 1, 0, 0)))]
        out = [(f"depthwise {label} {'CHW' if chw else 'HWC'}",
                T.case("depthwise", 20 + i, shape, 128, "f32", 8, geom, chw=chw))
               for i, (label, shape, geom) in enumerate(shapes) for chw in (False, True)]
        # ... and the pointwise producing their inputs, HWC output against channel-major
        pws = [("8x8x128 -> 128", (8, 8, 128, 128)), ("16x16x8 -> 16", (16, 16, 8, 16)),
               ("4x64x32 -> 64", (4, 64, 32, 64)), ("8x8x256 -> 64", (8, 8, 256, 64))]
        out += [(f"pointwise {label} {'CHW' if chw else 'HWC'}",
                 T.case("pointwise", 40 + i, shape, 128, "net", 8, fold=True, chw=chw))
                for i, (label, shape) in enumerate(pws) for chw in (False, True)]
        # ... and the first convolution (conv0's tiles: 3 channels, 3x3/2)
        cvs = [("33x41x3 -> 16x20x8 (mbv1_025_128)", (33, 41, 3, 8)),
               ("17x41x3 -> 8x20x32 (mbv1_128)", (17, 41, 3, 32))]
        out += [(f"conv2d {label} {'CHW' if chw else 'HWC'}",
                 T.case("conv2d", 50 + i, shape, -2, "net", 8, S2, chw=chw))
                for i, (label, shape) in enumerate(cvs) for chw in (False, True)]
    rows = []
    for label, c in out:
        e = c["expected"]
        if c["op"].endswith("pool"):
            per_out = c["geom"]["kh"] * c["geom"]["kw"]
        else:
            per_out = c["w"].size // c.get("out_shape", e.shape)[-1] if c["op"] != "depthwise" else c["w"].size // c["w"].shape[0]
        rows.append((label, c, int(e.size) * per_out))
    return rows


def run(T, rows, isa):
    from tessera import config, runners

    target = T._target()
    defines = config.isa_defines(target) if isa else []
    target["toolchain"]["cflags"] = list(target["toolchain"]["cflags"]) + ["-D" + d for d in defines]
    with tempfile.TemporaryDirectory(prefix="tessera-kbench-") as tmp:
        src = os.path.join(tmp, "cases.c")
        with open(src, "w") as f:
            f.write(T.firmware_source([c for _, c, _ in rows], perf=True))
        kernels = sorted(os.path.join(T.PNN, f) for f in os.listdir(T.PNN) if f.endswith(".c"))
        elf = T.build_firmware(tmp, [src, *kernels], target)
        text = runners.run(target["runner"], elf)
    got = T.outputs(text)
    perf = {int(m.group(1)): tuple(map(int, m.groups()[1:]))
            for m in re.finditer(r"PERF (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", text)}
    for i, (label, c, _) in enumerate(rows):
        if got[i] != c["expected"].tobytes():
            sys.exit(f"benchmarks/pulp_nn_kernels.py: {label}: output differs from the golden model")
    return perf


def main():
    import test_pulp_nn_gvsoc as T
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        sys.exit("benchmarks/pulp_nn_kernels.py: `gvsoc` is not on PATH; build GVSoC as docs/gvsoc.md says")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("mbv1_025_128", "mbv1_128", "chw"), default="mbv1_025_128",
                    help="whose layers' shapes (tiles on pulp_open / pulp_open_hyper; chw: depthwise "
                         "tiles with HWC and channel-major input)")
    ap.add_argument("--kernels", default=T.PNN,
                    help="the kernels/pulp_nn directory to build (another commit's, for a before/after)")
    args = ap.parse_args()
    T.PNN = os.path.abspath(args.kernels)
    rows = cases(T, args.model)
    # firmwares whose constants fit L2's code reservation (the cases' operands are constants)
    groups, size = [[]], 0
    for row in rows:
        c = row[1]
        n = c["x"].nbytes + c["w"].nbytes + c["expected"].nbytes
        if groups[-1] and size + n > 100_000:
            groups.append([])
            size = 0
        groups[-1].append(row)
        size += n
    fast, slow = {}, {}
    for g in groups:
        base = len(fast)
        fast.update({base + i: v for i, v in run(T, g, True).items()})
        slow.update({base + i: v for i, v in run(T, g, False).items()})
    print("one kernel call on pulp-open's 8 cores (GVSoC), bit-exact; counters of core 0")
    head = f"{'call':50} {'MACs':>8} {'portable':>9} {'Xpulp':>8} {'MAC/cyc':>8} {'instr':>7} {'ld stall':>8} {'I-wait':>7} {'TCDM':>6}"
    print(head)
    print("-" * len(head))
    for i, (label, _, macs) in enumerate(rows):
        cyc, instr, ldst, imiss, tcdm = fast[i]
        print(f"{label:50} {macs:8} {slow[i][0]:9} {cyc:8} {macs / cyc:8.2f} {instr:7} {ldst:8} {imiss:7} {tcdm:6}")


if __name__ == "__main__":
    main()
