"""The GAP8 path under QEMU (targets/gap8.yaml, platform qemu_virt_rv32):
the cluster HAL on nine harts, PULP-NN-style kernels on one and on eight
harts, and whole networks bit-exact with weights streamed from L3.

Needs riscv64-unknown-elf-gcc with picolibc and qemu-system-riscv32; skips
with the apt-get line otherwise.
"""

import os
import re
import shutil
import subprocess

import pytest

from tessera import config
from tessera.codegen import linker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAP8 = os.path.join(ROOT, "targets", "gap8.yaml")
HAL = os.path.join(ROOT, "kernels", "hal", "qemu_virt_rv32")
INCLUDE = os.path.join(ROOT, "kernels", "include")

pytestmark = pytest.mark.qemu


def _target():
    return config.load_target(GAP8, "gap8")


def _need_tools(target):
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pkgs = " ".join(target["toolchain"]["debian"] + target["runner"]["debian"])
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install {pkgs})")


def build_firmware(tmp, sources, target=None, defines=()):
    """Compile and link C sources with the GAP8 HAL, the target's flags and
    the linker script tessera generates for it; returns the ELF path."""
    from tessera_scons.platforms import qemu_virt_rv32 as plat

    target = target or _target()
    _need_tools(target)
    script = os.path.join(tmp, "link.ld")
    with open(script, "w") as f:
        f.write(linker.script(linker.view(target, plat.arch(target))))
    elf = os.path.join(tmp, "firmware.elf")
    tc = target["toolchain"]
    cmd = [tc["cc"], *tc["cflags"], "--specs=picolibc.specs", "--oslib=semihost", "--crt0=semihost",
           "-DPICOLIBC_INTEGER_PRINTF_SCANF", "-Wl,--no-warn-rwx-segments", "-Wall", "-Wextra", "-Werror",
           f"-DTSR_NCORES={target['cores']}", *[f"-D{d}" for d in defines], "-I", INCLUDE,
           "-T", script, os.path.join(HAL, "crt.S"), os.path.join(HAL, "hal.c"), *sources, "-o", elf]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stderr}"
    return elf


def run_firmware(elf, target=None, timeout=120):
    from tessera.runners import qemu

    target = target or _target()
    return qemu.run(target["runner"], elf, [], timeout)


def hal_lines(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"HAL (\S+)\s*(.*)", line.strip())
        if m:
            out[m.group(1)] = m.group(2).split()
    return out


# ---- the cluster HAL ---------------------------------------------------------

def test_cluster_hal_on_nine_harts(tmp_path):
    elf = build_firmware(str(tmp_path), [os.path.join(ROOT, "tests", "c", "hal_cluster_test.c")])
    text = run_firmware(elf)
    got = hal_lines(text)
    assert "done" in got, text
    n = int(got["cores"][0])
    assert n == 8
    # every core ran, on its own hart (1..8; hart 0 is the fabric controller)
    assert got["core_ids"] == [str(k + 1) for k in range(n)]
    assert got["harts"] == [str(k + 1) for k in range(n)]
    # a race is visible: without the barrier a core reads its neighbour's
    # slot before the neighbour's hart has written it ...
    assert got["without_barrier"] != [str(1000 + (k + 1) % n) for k in range(n)]
    # ... and the barrier orders the phases
    assert got["with_barrier"] == [str(1000 + (k + 1) % n) for k in range(n)]
    # per-core instruction counts follow the work (core k does k + 1 units)
    counts = [int(c) for c in got["core_counts"]]
    unit = counts[0]
    for k, c in enumerate(counts):
        assert abs(c - (k + 1) * unit) <= 64 * (k + 1), counts
    # DMA is asynchronous: nothing lands before the wait
    assert got["dma_before_wait"] == ["0"]
    assert got["dma_after_wait"] == [str(r * 8 + b) for r in range(8) for b in range(4)]
    assert got["dma_bytes"] == ["32"]


def test_cluster_hal_counts_are_deterministic(tmp_path):
    elf = build_firmware(str(tmp_path), [os.path.join(ROOT, "tests", "c", "hal_cluster_test.c")])
    assert run_firmware(elf) == run_firmware(elf)
