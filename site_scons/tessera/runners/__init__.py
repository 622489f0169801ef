"""Runners: execute a firmware under the target's runner (the host itself,
QEMU, GVSoC) with a timeout, and return what it printed.

    text = run(runner, firmware, args, timeout)

A run that hangs, faults or exits non-zero raises RunError with the reason
in one line.
"""

from ..errors import ConfigError
from . import gvsoc, host, qemu

KINDS = {"host": host.run, "qemu": qemu.run, "gvsoc": gvsoc.run}


def run(runner, firmware, args=(), timeout=None):
    kind = runner["kind"]
    if kind not in KINDS:
        raise ConfigError(f"runner.kind: {kind}", "no runner of this kind is available yet",
                          f"use one of: {', '.join(KINDS)}")
    return KINDS[kind](runner, firmware, list(args), timeout or runner["timeout"])
