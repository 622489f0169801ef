"""Kernel library adapters: how generated code calls one kernel library.

Each library under kernels/<name>/ has an adapter module here with the same
functions (see reference.py, the portable baseline): the kernel function and
argument struct of each op, the argument fields that stay fixed for the
layer and those that change per tile, and the weight layout in memory.
"""

import importlib

from ...errors import ConfigError

KNOWN = ("reference", "cmsis_nn", "pulp_nn")


def library(name):
    if name not in KNOWN:
        raise ConfigError(f"kernels: {name}", "no code generator for this kernel library",
                          f"use one of: {', '.join(KNOWN)}")
    return importlib.import_module(f"{__name__}.{name}")
