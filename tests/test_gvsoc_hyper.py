"""L3 on GVSoC's pulp-open: the pulp_open HAL's uDMA hyperbus transfers
(po_hyper_read/po_hyper_write, kernels/hal/pulp_open/hal.c), bare metal.

A seeded image of several megabytes goes into the board's HyperFlash (the
runner's `<firmware>.hyperflash.bin`, which GVSoC preloads); the firmware
reads ranges of it into L2 (odd offsets and sizes, across 64 kB, beyond
4 MB, an odd L2 address) and prints an FNV-1a hash of each, which the test
computes from the image itself. It also writes a pattern to the HyperRAM
and reads it back. One GVSoC run (a few seconds).

Needs GVSoC (PATH, or the prebuilt copy beside the checkout) and
riscv64-unknown-elf-gcc with picolibc; skips otherwise.
"""

import os
import re

import numpy as np
import pytest

from helpers import ROOT, report, scons
from tessera import runners
from test_gvsoc import GVSOC_MARKS, _target, build_firmware

pytestmark = GVSOC_MARKS

IMAGE_BYTES = 4_600_000
# (flash address, bytes, offset of the L2 destination in the buffer)
READS = [(0, 64, 0), (1001, 37, 0), (65536 - 5, 4100, 0), (4_400_001, 8191, 0), (123, 100, 1)]
BUF = 8192 + 4
RAM = (0x1000, 1000)   # HyperRAM address and bytes of the round trip

SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include "pulp_open.h"

static uint8_t buf[%(buf)d] __attribute__((aligned(4)));
static uint8_t back[%(ram_n)d] __attribute__((aligned(4)));
static const uint32_t reads[][3] = { %(reads)s };

static uint32_t fnv(const uint8_t *p, uint32_t n)
{
    uint32_t h = 2166136261u;
    while (n--)
        h = (h ^ *p++) * 16777619u;
    return h;
}

int main(void)
{
    for (unsigned i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        po_hyper_read(PO_HYPER_CS_FLASH, buf + reads[i][2], reads[i][0], reads[i][1]);
        printf("READ %%u %%08lx\n", i, (unsigned long)fnv(buf + reads[i][2], reads[i][1]));
    }
    for (uint32_t i = 0; i < %(ram_n)d; i++)
        buf[i] = (uint8_t)(i * 13u + 5u);
    po_hyper_write(PO_HYPER_CS_RAM, %(ram_addr)d, buf, %(ram_n)d);
    po_hyper_read(PO_HYPER_CS_RAM, back, %(ram_addr)d, %(ram_n)d);
    printf("RAM %%08lx\n", (unsigned long)fnv(back, %(ram_n)d));
    return 0;
}
"""


def fnv(data):
    h = 2166136261
    for b in bytes(data):
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def test_udma_reads_flash_and_round_trips_hyperram(tmp_path):
    image = np.random.default_rng(14).integers(0, 256, size=IMAGE_BYTES, dtype=np.uint8).tobytes()
    src = tmp_path / "hyper.c"
    src.write_text(SOURCE % dict(buf=BUF, ram_addr=RAM[0], ram_n=RAM[1],
                                 reads=", ".join("{%d, %d, %d}" % r for r in READS)))
    target = _target()
    target["toolchain"]["cflags"] = list(target["toolchain"]["cflags"]) + ["-I", os.path.join(ROOT, "kernels", "hal", "pulp_open")]
    elf = build_firmware(str(tmp_path), [str(src)], target)
    (tmp_path / "firmware.hyperflash.bin").write_bytes(image)
    text = runners.run(target["runner"], elf)
    got = {int(m.group(1)): int(m.group(2), 16) for m in re.finditer(r"READ (\d+) ([0-9a-f]{8})", text)}
    assert got == {i: fnv(image[a:a + n]) for i, (a, n, _) in enumerate(READS)}, text
    ram = re.search(r"RAM ([0-9a-f]{8})", text)
    assert ram and int(ram.group(1), 16) == fnv((i * 13 + 5) & 0xFF for i in range(RAM[1])), text



@pytest.mark.slow
def test_network_with_weights_in_flash_is_bit_exact(tmp_path):
    """pulp_open_hyper places every weight in L3 (the HyperFlash): the
    build's storage.bin is the flash image, the layers' weights come to L2
    by the uDMA, and every layer still matches the golden model."""
    out = tmp_path / "out"
    scons("target=pulp_open_hyper", "model=tiny", out=out, check=True)
    rep = report(out, "pulp_open_hyper", "tiny")
    assert rep["verdict"] == "pass"
    assert all(layer["match"] for layer in rep["layers"])
    assert rep["totals"]["dma_bytes"]["udma_hyper"] > 0
    assert os.path.getsize(os.path.join(out, "pulp_open_hyper", "tiny", "storage.bin")) > 0
    # a chunk's arrays (weights, bias, multipliers, shifts) follow each other
    # on the card and in L2 (tiny: every chunk is a whole layer), so the
    # stream's table queues each chunk as one HyperFlash read, not four
    net = (out / "pulp_open_hyper" / "tiny" / "src" / "network.c").read_text()
    chunks = [int(n) for n in re.search(r"wchunks\[\] = \{([^}]*)\}", net).group(1).split(",")]
    assert len(chunks) > 2 and chunks == list(range(len(chunks))), chunks
