"""The generated code keeps a layer's tiles as a grid (one entry per row
band, column band and channel tile; codegen.layer.grid_tables) and rebuilds
tile i at run time (tsr_tile_at, tessera/tile.h), in either order (channel
tiles first, or row bands first: a storage-level tile). Compiled with the host
gcc, every rebuilt tile of random layers must equal the tile the tiler,
the memory plan and the out-of-core accounting walk (tiler.tiles).
"""
import os
import random
import shutil
import subprocess

import pytest

from tessera.codegen.layer import grid_first, grid_indices, grid_step, grid_tables
from tessera.tiler import grid, tiles
from tessera.tiles.geometry import rows_first

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "kernels", "include")
FIELDS = ("oh0", "oh", "ow0", "ow", "oc0", "oc", "ih0", "ih", "iw0", "iw", "ic0", "ic")


def _layers(seed, n):
    """Random layers (tiler views) and tilings: every op shape the grid
    covers (strided, padded, dilated windows, channel-wise ops, linear)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        op = rng.choice(["conv2d", "depthwise", "pointwise", "maxpool", "linear"])
        if op == "linear":
            H = W = 1
            kernel, stride, pad, dil = [1, 1], [1, 1], [0, 0, 0, 0], [1, 1]
            C, Co = rng.randint(1, 300), rng.randint(1, 300)
            Ho = Wo = 1
        else:
            H, W = rng.randint(1, 60), rng.randint(1, 60)
            k = 1 if op == "pointwise" else rng.choice([1, 2, 3, 5])
            s = 1 if op == "pointwise" else rng.choice([1, 2])
            d = rng.choice([1, 1, 2]) if op == "conv2d" else 1
            span = d * (k - 1) + 1
            p = [rng.randint(0, span - 1) for _ in range(4)] if span > 1 else [0, 0, 0, 0]
            if H + p[0] + p[2] < span or W + p[1] + p[3] < span:
                continue
            kernel, stride, pad, dil = [k, k], [s, s], p, [d, d]
            Ho = (H + p[0] + p[2] - span) // s + 1
            Wo = (W + p[1] + p[3] - span) // s + 1
            C = rng.randint(1, 200)
            Co = C if op in ("depthwise", "maxpool") else rng.randint(1, 200)
        view = {"name": "l", "op": op, "in": [H, W, C], "out": [Ho, Wo, Co], "kernel": kernel,
                "stride": stride, "pad": pad, "dilation": dil}
        tiling = {"tile": {"h": rng.randint(1, Ho), "w": rng.randint(1, Wo), "c": rng.randint(1, Co)}}
        if rng.random() < 0.4:
            tiling["order"] = "hcw"     # row bands first: a storage-level tile
        out.append((view, tiling))
    return out


PRINT = ('printf("%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d\\n", t.oh0, t.oh, t.ow0, t.ow, '
         't.oc0, t.oc, t.ih0, t.ih, t.iw0, t.iw, t.ic0, t.ic, t.pad_t, t.pad_l, t.pad_b, t.pad_r, '
         't.new_weights);')


@pytest.mark.parametrize("walk", [False, True], ids=["tsr_tile_at", "grid_step"])
def test_rebuilt_tiles_equal_the_tile_list(tmp_path, walk):
    """tsr_tile_at(i) for every tile, or (walk: PULP-open's tile loops)
    tile 0 by grid_first and every next one by grid_step from the one
    before, from the tables alone."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host gcc")
    cases = _layers(16, 60)
    src = ['#include <stdio.h>', '#include "tessera/tile.h"',
           "static void dump(const tsr_grid_t *g, int n)", "{",
           "    for (int i = 0; i < n; i++) {", "        tsr_tile_t t;", "        tsr_tile_at(&t, g, i);",
           "        " + PRINT, "    }", '    printf("end\\n");', "}"]
    calls = []
    for k, (view, tiling) in enumerate(cases):
        chans, rows, cols = grid(view, tiling)
        src += grid_tables(chans, rows, cols, rows_first(tiling), name=f"g{k}", struct=not walk)
        n = len(chans) * len(rows) * len(cols)
        if not walk:
            calls.append(f"    dump(&g{k}, {n});")
            continue
        decl = grid_indices(chans, rows, cols)
        src += [f"static void walk{k}(void)", "{", "    tsr_tile_t t;", *(["    " + decl] if decl else []),
                *("    " + line for line in grid_first("t", f"g{k}")),
                f"    for (int i = 0; i < {n}; i++) {{", "        " + PRINT,
                f"        if (i + 1 < {n}) {{",
                *("            " + line for line in grid_step(chans, rows, cols, rows_first(tiling), "t", f"g{k}")),
                "        }", "    }", '    printf("end\\n");', "}"]
        calls.append(f"    walk{k}();")
    src += ["int main(void)", "{", *calls, "    (void)dump;", "    return 0;", "}"]
    c = tmp_path / "grid.c"
    c.write_text("\n".join(src) + "\n")
    exe = tmp_path / "grid"
    subprocess.run([gcc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-O2", "-I", INCLUDE, str(c),
                    os.path.join(ROOT, "kernels", "reference", "tile.c"), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    at = 0
    for view, tiling in cases:
        prev_c = None
        for t in tiles(view, tiling):
            new_w = int(t["oc0"] != prev_c)
            prev_c = t["oc0"]
            want = [t[f] for f in FIELDS] + list(t["pad"]) + [new_w]
            assert list(map(int, lines[at].split())) == want, (view, tiling, t["index"])
            at += 1
        assert lines[at] == "end", (view, tiling)
        at += 1
    assert at > 200     # the cases give many tiles, not one per layer
    assert any(rows_first(t) and t["tile"]["c"] < v["out"][2] for v, t in cases)
