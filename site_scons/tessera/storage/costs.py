"""Costs of out-of-core tasks in integer nanoseconds: storage transfers
from the target's `kind: storage` level, compute from the calibrated cost
model (cost/model.py) when the target has coefficients, else from a
cycles-per-MAC figure."""

from ..cost.model import COMPUTE


def storage_params(level):
    """A `kind: storage` level of the target YAML (read_bandwidth and
    write_bandwidth in B/s, latency_us, block) as the problem's storage."""
    return {"read_ns_per_kb": int(round(1024e9 / level["read_bandwidth"])),
            "write_ns_per_kb": int(round(1024e9 / level["write_bandwidth"])),
            "latency_ns": int(round(level["latency_us"] * 1000)),
            "block": int(level.get("block", 512))}


def compute_cycles(coefs, op, feats, share=1.0, cycles_per_mac=2.0):
    """Core cycles of one tile: the cost model's compute part for the op
    (its features, `share` of the per-layer constant), or macs times
    cycles_per_mac without coefficients. The model predicts its runner's
    count (QEMU instructions for Cortex-M): taken as cycles, an assumption
    said in docs/out_of_core.md."""
    if coefs is None:
        return feats["macs"] * cycles_per_mac + feats["out_elems"]
    c = coefs["ops"].get(op, coefs["default"])
    x = dict(feats, layer=share)
    return sum(c.get(k, 0.0) * x.get(k, 0) for k in COMPUTE)


def cycles_to_ns(cycles, clock_hz):
    return int(round(cycles * 1e9 / clock_hz))
