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


def input_offset(lib, layer, graph):
    """The input offset generated code hands the library's kernel: 0 where
    the library folds it into the bias at build time (its bias_values)."""
    folds = getattr(lib, "folds_offset", None)
    return 0 if folds is not None and folds(layer, graph) else layer.input_offset


def split_kernel(lib, layer, graph):
    """The step of a split reduction (tessera.codegen.split) the library
    runs: its adapter's split_kernel, else the reference kernels'."""
    own = getattr(lib, "split_kernel", None)
    return own(layer, graph) if own is not None else "tsr_split_step"
