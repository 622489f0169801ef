"""Attention's row-wise kernels on Cortex-M under QEMU: tsr_cmsis_softmax,
tsr_cmsis_layernorm and tsr_cmsis_lut (kernels/cmsis_nn/rowwise.c, the DSP
instructions real) against the golden model bit for bit, on the cases of
tests/test_attention_rowwise_gvsoc.py (the transformers' shapes, Deeploy's
forms, the fallbacks), each also on the reference kernel in the same
firmware; `rowwise_instructions` gives the instructions of both (QEMU
-icount, the HAL's counter: to within its 40-instruction tick).

Needs arm-none-eabi-gcc with picolibc and qemu-system-arm; skips otherwise.
"""

import pytest

from test_attention_gvsoc import parse
from test_attention_rowwise_gvsoc import CASES, firmware_source
from test_cmsis_nn import build_harness


def run_cases(tmp, target_name="stm32h7", cases=CASES):
    from tessera import runners

    elf, runner = build_harness([], target_name, tmp, source=firmware_source(cases, "cmsis"))
    return parse(runners.run(runner, elf))


def rowwise_instructions(tmp, target_name="stm32h7"):
    """{case name: (values, instructions on tsr_cmsis_*, on the reference)}."""
    _, counts = run_cases(tmp, target_name)
    return {c["name"]: (c["x"].size, counts[("cmsis", i)], counts[("ref", i)]) for i, c in enumerate(CASES)
            if c["name"]}


@pytest.mark.qemu
@pytest.mark.parametrize("target_name", ["stm32h7", "stm32f4"])
def test_cmsis_rowwise_matches_golden_under_qemu(tmp_path, target_name):
    got, _ = run_cases(tmp_path, target_name)
    for i, c in enumerate(CASES):
        want = c["expected"].tobytes()
        assert got[("cmsis", i)] == want, c["name"] or f"case{i}"
        assert got[("ref", i)] == want, c["name"] or f"case{i}"
