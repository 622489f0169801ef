#!/usr/bin/env python3
"""CMSIS-NN fused kernels (kernels/cmsis_nn/fused.c), block size (not a
test): QEMU instructions of one fused tile on stm32h7's Cortex-M7 for
several fd, every output checked bit-exact against the golden layers in the
firmware (tests/test_cmsis_fused.py's harness).

    .venv/bin/python benchmarks/cmsis_fused.py

PW->DW: fd = C runs the pointwise then the depthwise once, the depthwise
writing the band's output directly; fd < C runs them per block of fd
channels over a compact fd-channel intermediate, the depthwise writing a
compact block that is then copied into its channels (CMSIS-NN's API takes
dense HWC tensors only). DW->PW: fd rows per block.
"""

import os
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402

from test_cmsis_fused import dw_pw_case, harness_source, pw_dw_case  # noqa: E402
from test_cmsis_nn import run_harness  # noqa: E402


def geometry(h, w, k=3, s=1):
    pad = k // 2
    return dict(kh=k, kw=k, sh=s, sw=s, pad_t=pad, pad_l=pad, pad_b=pad, pad_r=pad, in_h=h, in_w=w,
                out_h=(h + 2 * pad - k) // s + 1, out_w=(w + 2 * pad - k) // s + 1)


def main():
    # the same tile for every fd (one seed per kind): only the block size changes
    rng = np.random.default_rng
    rows = []
    # mbv2_025_128's b2 block at a 12-row band: 16 -> 48 channels (PW->DW), then 48 -> 24 (DW->PW)
    for fd in (48, 24, 16, 12, 8, 4, 1):
        rows.append((f"pw_dw 12x32x16 -> 48 -> 3x3 s1, fd {fd} channels", pw_dw_case(rng(5), geometry(12, 32), 16, 48, fd)))
    for fd in (12, 6, 4, 2, 1):
        rows.append((f"dw_pw 12x32x48 3x3 s1 -> 24, fd {fd} rows", dw_pw_case(rng(6), geometry(12, 32), 48, 24, fd)))
    cases = [c for _, c in rows]
    with tempfile.TemporaryDirectory() as tmp:
        results = run_harness(cases, "stm32h7", Path(tmp), source=harness_source(cases))
    for i, (name, _) in enumerate(rows):
        _, ok, count, _, _ = results[i]
        print(f"{name:45} {'bit-exact' if ok else 'MISMATCH':9} {count:>10} instructions")


if __name__ == "__main__":
    main()
