"""The cost model: one place that estimates a layer's count (QEMU
instructions or GVSoC cycles, whatever the target's runner measures) from
its op, tile shape and DMA traffic, with coefficients fitted per target and
kernel library (kernels/<library>/cost/<target>.yaml, written by
tools/fit_cost_model.py). See docs/cost_model.md.

features.py: what a layer does (MACs, elements, tiles, DMA bytes and
transfers per engine), from the IR and the tiling alone, before any run.
model.py: the coefficients file and the estimate.
api.py: the stable API for the tiler, the fusion selector and the
out-of-core scheduler (estimate_layer, estimate_group), re-exported here.
sweeps.py: the microbenchmark networks tools/fit_cost_model.py fits on.
"""

from .api import coefficients, estimate_group, estimate_layer, explain_group, explain_layer  # noqa: F401
