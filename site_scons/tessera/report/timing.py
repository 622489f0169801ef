"""What a count is in time: GVSoC's cycles at the target's clock
(`clock_hz` in the target YAML) are milliseconds; QEMU's instructions are
not cycles of any chip and get no time; the host's nanoseconds are wall
time."""

UNITS = {"gvsoc-cycles": "cycles", "qemu-instructions": "instructions", "host-ns": "ns"}


def label(meta):
    """{"unit", "clock_hz", "ms"}: the count's unit and how (or whether)
    it becomes milliseconds, for report.json's `counts`."""
    method, clock = meta["counts"], meta.get("clock_hz")
    out = {"unit": UNITS.get(method, "none")}
    if method == "gvsoc-cycles" and clock:
        out.update(clock_hz=clock, ms=f"cycles at {clock / 1e6:g} MHz ({clock:,} Hz, the target YAML's clock_hz)")
    elif method == "qemu-instructions":
        out["ms"] = "none: QEMU counts instructions, not cycles of the chip"
    elif method == "host-ns":
        out["ms"] = "wall time on the build machine"
    return out


def ms(count, counts):
    """Milliseconds of `count` under report.json's `counts`, or None."""
    if count is None:
        return None
    if counts.get("clock_hz") and counts.get("unit") == "cycles":
        return round(1000.0 * count / counts["clock_hz"], 4)
    if counts.get("unit") == "ns":
        return round(count / 1e6, 4)
    return None
