"""Runners: execute a firmware under the target's runner (the host itself,
QEMU, GVSoC) with a timeout, and return what it printed.

    text = run(runner, firmware, args, timeout)

A run that hangs, faults or exits non-zero raises RunError with the reason
in one line.
"""

import os
import shutil
import tempfile

from ..errors import ConfigError
from . import gvsoc, host, qemu

# the card's image a build writes beside the firmware (codegen/image.py)
STORAGE_IMAGE = "storage.bin"
# the name the firmware opens its card by (storage=card.bin), in the folder it runs in
CARD = "card.bin"
KINDS = {"host": host.run, "qemu": qemu.run, "gvsoc": gvsoc.run}


def run(runner, firmware, args=(), timeout=None):
    kind = runner["kind"]
    if kind not in KINDS:
        raise ConfigError(f"runner.kind: {kind}", "no runner of this kind is available yet",
                          f"use one of: {', '.join(KINDS)}")
    image = os.path.join(os.path.dirname(os.path.abspath(firmware)), STORAGE_IMAGE)
    if not os.path.isfile(image):
        return KINDS[kind](runner, firmware, list(args), timeout or runner["timeout"])
    # a target with a storage level: the firmware reads and writes a scratch
    # copy of the card's image, so the build's storage.bin stays as built.
    # It is given the copy's name, not its path, and runs in its folder: the
    # harness reads the argument after the counter starts, so the length of
    # a path (where the build is) would shift every count's phase (QEMU's
    # timer ticks every 40 instructions: a layer's count moved by one tick)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(image), prefix=".card-") as scratch:
        shutil.copyfile(image, os.path.join(scratch, CARD))
        return KINDS[kind](runner, os.path.abspath(firmware), [*args, f"storage={CARD}"],
                           timeout or runner["timeout"], cwd=scratch)
