"""Target YAML: the MCU as data (memory levels, DMA engines, cores,
toolchain, kernel library, runner).

A new target is a new file in targets/; code changes only when it needs a
new ISA or platform (a HAL and a kernel set).
"""

import os

from ..errors import ConfigError
from ..util import paths
from .schema import Field, validate
from .yamlio import load_yaml

# ISA extensions kernels can be built for (each defines TSR_ISA_<NAME>)
ISA_EXTENSIONS = ("xpulpv2",)
MEMORY_KINDS = ("scratchpad", "sram", "flash", "external", "host", "storage")
# what only a `kind: storage` level (SD card, QSPI flash behind a driver)
# has: it is reached through the HAL's storage driver, not by loads and stores
STORAGE_KEYS = ("read_bandwidth", "write_bandwidth", "latency_us", "block", "endurance")
ROLES = ("tiles", "activations", "weights")
# The most compute cores each platform has, as facts with their sources
# (docs/bad_input.md#core-limits; tests/test_config.py checks the C headers):
# - host: the HAL runs the cores in turn; HAL_MAX_CORES (16,
#   kernels/include/tessera/hal.h) sizes every HAL's per-core state
# - cortexm: the STM32H743 (Cortex-M7, DS12110) and STM32F446 (Cortex-M4,
#   DS10693) are single-core, and so are QEMU's mps2-an500/an386 boards
# - pulp_open: the PULP cluster's 8 worker cores (GVSoC's pulp_open
#   cluster.json: nb_pe 9 with has_cc, the 9th the cluster controller;
#   tessera's HAL: PO_CL_MAX_CORES 8, kernels/hal/pulp_open/pulp_open.h)
# - qemu_virt_rv32: GAP8's cluster of 8 cores (GAP8 datasheet: a fabric
#   controller and an 8-core cluster); on QEMU's virt, hart 0 is the fabric
#   controller and harts 1..cores the cluster (kernels/hal/qemu_virt_rv32/
#   crt.S), so cores is also below the runner's -smp
HAL_MAX_CORES = 16
PLATFORM_CORES = {"host": HAL_MAX_CORES, "cortexm": 1, "pulp_open": 8, "qemu_virt_rv32": 8}
# every platform tessera builds for has a 32-bit address space
ADDRESS_SPACE = 1 << 32
KERNELS_DIR = paths.KERNELS

LEVEL = Field("map", fields={
    "size": Field("int", "bytes", required=True, minimum=1, maximum=ADDRESS_SPACE),
    "kind": Field("str", "scratchpad | sram | flash | external | host | storage", required=True,
                  choices=MEMORY_KINDS),
    "address": Field("int", "base address where the platform needs one", minimum=0,
                     maximum=ADDRESS_SPACE - 1),
    "reserved": Field("dict", "bytes kept out of tessera's reach, by purpose (stacks, code, ...)",
                      default={}, values=Field("int", minimum=0)),
    "writable": Field("bool", "false for flash-like read-only levels", default=True),
    "note": Field("str", "where the value comes from (datasheet, assumption)", default=""),
    # kind: storage only (docs/out_of_core.md)
    "read_bandwidth": Field("number", "storage: sustained read bytes per second", minimum=1),
    "write_bandwidth": Field("number", "storage: sustained write bytes per second", minimum=1),
    "latency_us": Field("number", "storage: fixed microseconds of every transfer (command, seek)", minimum=0),
    "block": Field("int", "storage: bytes of a block; transfers move whole blocks", minimum=1),
    "endurance": Field("int", "storage: write cycles a block survives (wear)", minimum=1),
})

DMA = Field("map", fields={
    "name": Field("str", required=True),
    "src": Field("str", "level the engine reads (the slower one)", required=True),
    "dst": Field("str", "level the engine writes (the faster one); it also copies back", required=True),
    "dims": Field("int", "strided dimensions it supports (1, 2 or 3)", default=1, minimum=1, maximum=3),
    "bandwidth": Field("number", "bytes per cycle", default=1.0, minimum=0),
    "setup": Field("int", "cycles to start a transfer", default=0, minimum=0),
    "note": Field("str", default=""),
})

TOOLCHAIN = Field("map", required=True, fields={
    "kind": Field("str", "host | arm-none-eabi | riscv-elf", required=True,
                  choices=("host", "arm-none-eabi", "riscv-elf")),
    "cc": Field("str", "C compiler program", required=True, nonblank=True),
    "ar": Field("str", "archiver program", default="ar", nonblank=True),
    "cflags": Field("list", "compiler flags (CPU, ABI, optimization)", default=[],
                    items=Field("str", "a compiler flag", nonblank=True)),
    "ldflags": Field("list", "linker flags", default=[], items=Field("str", "a linker flag", nonblank=True)),
    "debian": Field("list", "Debian packages that provide it", default=[], items=Field("str")),
    "isa": Field("list", "ISA extensions beyond cflags' -march that the kernels may emit (xpulpv2: PULP's "
                 "SIMD dot products, post-increment loads, hardware loops; the code then runs on PULP "
                 "silicon or GVSoC, not QEMU)", default=[], items=Field("str", choices=ISA_EXTENSIONS)),
})

RUNNER = Field("map", required=True, fields={
    "kind": Field("str", "host | qemu | gvsoc", required=True, choices=("host", "qemu", "gvsoc")),
    "program": Field("str", "emulator or simulator program", default=""),
    "args": Field("list", "arguments before the firmware", default=[], items=Field("str")),
    "timeout": Field("int", "seconds before a run counts as hung", default=600, minimum=1),
    "debian": Field("list", "Debian packages that provide it", default=[], items=Field("str")),
    "install": Field("str", "how to get the program when no Debian package provides it", default=""),
    "counts": Field("str", "what the per-layer counts measure", default="none",
                    choices=("none", "host-ns", "qemu-instructions", "gvsoc-cycles")),
    "note": Field("str", "what the counts are and are not, for the report", default=""),
})

TARGET = Field("map", fields={
    "description": Field("str", "one line shown by `scons -h`", required=True),
    "platform": Field("str", "HAL directory under kernels/hal/", required=True,
                      choices=tuple(PLATFORM_CORES)),
    "cores": Field("int", "compute cores that run a layer's kernels", required=True, minimum=1),
    "memory": Field("dict", "memory levels, fastest first", required=True, values=LEVEL),
    "place": Field("map", "which level holds what", required=True, fields={
        role: Field("str", f"level for {role}", required=True) for role in ROLES}),
    "dma": Field("list", "DMA engines", default=[], items=DMA),
    "toolchain": TOOLCHAIN,
    "kernels": Field("str", "kernel library under kernels/ (reference, pulp_nn, cmsis_nn)",
                     required=True),
    "runner": RUNNER,
    "clock_hz": Field("int", "core clock, to put compute counts and storage times on one scale", minimum=1),
    "ram_cap": Field("int", "the firmware's total RAM (activations, tile arena, reserved bytes) at most this "
                     "many bytes: the tile budget is the largest that fits (a model's ram_cap: wins)", minimum=1),
    "direct": Field("str", "layers run in place from the activation buffers, no tile arena for them "
                    "(docs/memory.md): none; flat (the tile level is RAM like the activations': wherever it "
                    "lowers total RAM); ram_cap (a faster tile level: only when a RAM cap needs it)",
                    default="none", choices=("none", "flat", "ram_cap")),
    "cost_model": Field("str", "whose cost model coefficients to use (kernels/<kernels>/cost/<name>.yaml), "
                        "e.g. gap8 for a copy of gap8 with another L1 size; by default the target's own, "
                        "else those of a target with the same cores (docs/cost_model.md)"),
    "fusion": Field("str", "the default fusion policy of models built for this target (a model's fusion: "
                    "and the command line's fusion= win; unset: min_latency)",
                    choices=("none", "min_latency", "min_transfer", "min_memory")),
    "fusion_cost": Field("str", "the default fusion_cost of models built for this target (a model's "
                         "fusion_cost: and the command line's fusion_cost= win; unset: model)",
                         choices=("model", "measured")),
    "note": Field("str", default=""),
})


def _check_cross_references(target, path):
    levels = target["memory"]
    if not levels:
        raise ConfigError(path, "memory: no memory levels", "declare at least L1 and L2")
    for role, level in target["place"].items():
        if level not in levels:
            raise ConfigError(path, f"place.{role}: unknown level {level!r}",
                              f"use one of {', '.join(levels)}")
        if role != "weights" and not levels[level]["writable"]:
            raise ConfigError(path, f"place.{role}: level {level!r} is read-only (writable: false)",
                              f"place {role} in a writable level: "
                              f"{', '.join(n for n, lv in levels.items() if lv['writable'])}")
    most = PLATFORM_CORES[target["platform"]]
    if target["cores"] > most:
        raise ConfigError(path, f"cores: {target['cores']}, but a {target['platform']} platform has at most "
                          f"{most}", f"set cores to 1..{most}")
    args = [str(a) for a in target["runner"]["args"]]
    if target["platform"] == "qemu_virt_rv32" and "-smp" in args[:-1]:
        smp = args[args.index("-smp") + 1]
        harts = int(smp) if smp.isdigit() else None
        if harts is None or target["cores"] + 1 > harts:
            raise ConfigError(path, f"cores: {target['cores']} with runner.args -smp {smp}",
                              "QEMU's hart 0 is the fabric controller and harts 1..cores the cluster: "
                              f"give -smp {target['cores'] + 1} or fewer cores")
    kernels = target["kernels"]
    if os.sep in kernels or kernels.startswith(".") or not os.path.isfile(
            os.path.join(KERNELS_DIR, kernels, "library.yaml")):
        libs = sorted(d for d in os.listdir(KERNELS_DIR)
                      if os.path.isfile(os.path.join(KERNELS_DIR, d, "library.yaml")))
        raise ConfigError(path, f"kernels: {kernels!r}: unknown kernel library", f"choose one of: {', '.join(libs)}")
    named = target.get("cost_model")
    if named is not None:
        cost_dir = os.path.join(KERNELS_DIR, kernels, "cost")
        if os.sep in named or named.startswith(".") or not os.path.isfile(os.path.join(cost_dir, named + ".yaml")):
            have = sorted(f[:-5] for f in os.listdir(cost_dir) if f.endswith(".yaml")) \
                if os.path.isdir(cost_dir) else []
            raise ConfigError(path, f"cost_model: {named!r}: no coefficients kernels/{kernels}/cost/{named}.yaml",
                              f"name one of: {', '.join(have)}" if have else
                              f"the {kernels} library has no fitted cost model; drop cost_model")
    for i, dma in enumerate(target["dma"]):
        for end in ("src", "dst"):
            if dma[end] not in levels:
                raise ConfigError(path, f"dma[{i}].{end}: unknown level {dma[end]!r}",
                                  f"use one of {', '.join(levels)}")
    _check_storage(target, path)
    for name, level in levels.items():
        if level.get("address") is not None and level["address"] + level["size"] > ADDRESS_SPACE:
            raise ConfigError(path, f"memory.{name}: address 0x{level['address']:x} plus {level['size']} bytes "
                              "ends beyond the 32-bit address space", "check the address and the size")
        reserved = sum(level["reserved"].values())
        if reserved >= level["size"]:
            raise ConfigError(path, f"memory.{name}.reserved: {reserved} bytes reserved "
                              f"of a {level['size']}-byte level", "reserve less or enlarge the level")
    if "xpulpv2" in target["toolchain"]["isa"] and target["runner"]["kind"] != "gvsoc":
        raise ConfigError(path, f"toolchain.isa: xpulpv2 with a {target['runner']['kind']} runner",
                          "Xpulp code runs on PULP silicon or GVSoC only (QEMU executes none of it): "
                          "drop xpulpv2 or run on GVSoC")
    if target["runner"]["kind"] != "host" and not target["runner"]["program"]:
        raise ConfigError(path, "runner.program: missing", "name the emulator, e.g. qemu-system-arm")


def _check_storage(target, path):
    """A storage level has its figures, and only it has them; tiles and
    activations never live there (the planner swaps them through SRAM)."""
    levels = target["memory"]
    for name, level in levels.items():
        given = [k for k in STORAGE_KEYS if level.get(k) is not None]
        if level["kind"] != "storage":
            if given:
                raise ConfigError(path, f"memory.{name}.{given[0]}: only a `kind: storage` level has it",
                                  f"drop it, or set memory.{name}.kind: storage")
            continue
        for key in STORAGE_KEYS:
            if level.get(key) is None:
                raise ConfigError(path, f"memory.{name}.{key}: missing for a storage level",
                                  f"give the card's figure ({LEVEL.fields[key].doc})")
        if level.get("address") is None:
            raise ConfigError(path, f"memory.{name}.address: missing for a storage level",
                              "give a window address no memory uses: the HAL reads pointers there as "
                              "storage offsets")
        if not level["writable"]:
            raise ConfigError(path, f"memory.{name}.writable: false for a storage level",
                              "storage also holds swapped activations: drop writable: false")
        if sum(1 for lv in levels.values() if lv["kind"] == "storage") > 1:
            raise ConfigError(path, f"memory.{name}: a second storage level", "declare one storage level")
        for role in ("tiles", "activations"):
            if target["place"][role] == name:
                raise ConfigError(path, f"place.{role}: {name} is storage",
                                  f"place {role} in SRAM; the planner moves what does not fit to {name}")
        if target.get("clock_hz") is None:
            raise ConfigError(path, "clock_hz: missing with a storage level",
                              "give the core clock in Hz (it puts compute and IO times on one scale)")


def storage_level(target):
    """Name of the target's storage level, or None."""
    return next((n for n, lv in target["memory"].items() if lv["kind"] == "storage"), None)


def isa_defines(target):
    """The C macros that switch the kernels' ISA-specific paths on."""
    return ["TSR_ISA_" + ext.upper() for ext in target["toolchain"]["isa"]]


def usable_bytes(level):
    """Bytes of a level tessera may plan into: size minus reserved."""
    return level["size"] - sum(level["reserved"].values())


def parse_target(data, path, name):
    target = validate(data, TARGET, path)
    _check_cross_references(target, path)
    target["name"] = name
    target["path"] = path
    return target


def load_target(path, name):
    return parse_target(load_yaml(path), path, name)
