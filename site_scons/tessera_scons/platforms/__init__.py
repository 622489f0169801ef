"""Platform glue: how to compile and link a firmware for a target's
`platform:` (the HAL directory under kernels/hal/). One module per platform
with configure(env, target) and link(env, target, objects, out)."""

import importlib

from tessera.errors import ConfigError

KNOWN = ("host", "cortexm", "pulp_open", "qemu_virt_rv32")


def platform(name, where):
    if name not in KNOWN:
        raise ConfigError(where, f"platform: {name}: no build support for this platform yet",
                          f"use one of: {', '.join(KNOWN)}")
    return importlib.import_module(f"{__name__}.{name}")
