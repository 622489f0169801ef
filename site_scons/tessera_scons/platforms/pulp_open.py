"""The pulp_open platform: PULP-open under GVSoC, bare metal (no PULP SDK).

Debian's riscv64-unknown-elf-gcc for RV32IMC (it cannot emit Xpulp),
picolibc for the harness's stdio (the HAL gives it a stdout on GVSoC's
console and an _exit through the SoC's status register), the HAL's own
start-up (kernels/hal/pulp_open/crt0.S, entered at `.text.start`), and the
linker script of tessera.codegen.linker from the target's memory levels.
The cluster cores' stacks sit at the top of the tile level: the
`memory.<tiles>.reserved.stacks` bytes, core 0 two shares (crt0.S), and
the link checks the deepest call chain of each against its share
(tessera.check.stack).
"""

from tessera.errors import ConfigError

from . import cross

# the HAL counts each cluster core's cycles inside forks (hal_core_counts);
# the test harness prints them and the report shows the work split
# GVSoC is deterministic per core too, so every run reports the split
COUNTS_PER_CORE = "always"

MAX_CORES = 8
PICOLIBC = ["--specs=picolibc.specs"]
MIN_STACK = 256
FORKED = ("compute*", "dw_part", "pw_part", "project", "step", "k[0-9]*")


def arch(target):
    """The linker's platform part: entry, start-up section, stack symbols."""
    where = target["path"]
    tiles = target["place"]["tiles"]
    cores = target["cores"]
    if cores > MAX_CORES:
        raise ConfigError(where, f"cores: {cores}", f"the PULP-open cluster has {MAX_CORES} cores")
    stacks = target["memory"][tiles]["reserved"].get("stacks", 0)
    per_core = (stacks // cores) & ~15
    if per_core < MIN_STACK:
        raise ConfigError(where, f"memory.{tiles}.reserved.stacks: {stacks} bytes for {cores} cores",
                          f"reserve at least {MIN_STACK} bytes of stack per cluster core")
    return {
        "entry": "_start",
        "output_arch": "riscv",
        "startup": [".text.start"],
        "symbols": {"__l1_stacks_top": f"ORIGIN({tiles}) + LENGTH({tiles})",
                    "__cl_stack_size": str(per_core)},
        "discard": [],
        # the HAL's hot variables (fork, DMA ids, counters) in L1: in L2 each
        # access from the cluster takes about 15 cycles
        "areas": ["hal"],
        # the cluster's instruction caches (GVSoC pulp-open: 512 B L0 per
        # core, 4 kB shared in 2 banks, lines of 16 B, random replacement)
        # index code by its address modulo 1 kB: the HAL and the kernels
        # first, at a 4 kB boundary after the activation arena, so that
        # their layout, and the cycles, do not move with the arena's size,
        # the generated layers or the harness (issue 32's 2% drift)
        # and each of the library's members at a 1 kB boundary, so that one
        # kernel's code growing does not move the kernels after it (62 bytes
        # more in the depthwise objects moved mbv1_128's other layers by up to 0.8%,
        # 0.26% in all; aligned, by 0.1% and 0.008%: docs/gvsoc.md)
        "code_layout": {"align": 4096, "each": 1024, "first": ["*/hal/*.o", "*libtessera_kernels.a:"],
                        "last": ["*harness.o", "*libc.a:*", "*libgcc.a:*"]},
    }


def stacks(target):
    """What the link checks the cluster's stacks against (tessera.check.stack):
    crt0.S's split of memory.<tiles>.reserved.stacks, core 0 (main, the
    harness and the layer functions beneath the kernels) two shares and the
    other cores the rest evenly, 16-byte aligned (fewer than 4 cores: equal
    shares); a worker runs only what hal_fork hands it."""
    tiles, cores = target["place"]["tiles"], target["cores"]
    reserved = target["memory"][tiles]["reserved"].get("stacks", 0)
    per_core = (reserved // cores) & ~15
    if cores >= 4:
        shares = (2, (cores - 2) / (cores - 1))
        sizes = (2 * per_core, (per_core * (cores - 2) // (cores - 1)) & ~15)
    else:
        shares, sizes = (1, 1), (per_core, per_core)
    out = [{"who": "core 0", "root": "tsr_cluster_entry", "skip": [], "bytes": sizes[0], "share": shares[0]}]
    if cores > 1:
        out.append({"who": f"cores 1-{cores - 1}", "root": "tsr_cluster_entry", "skip": ["main", "exit"],
                    "bytes": sizes[1], "share": shares[1]})
    return {"objdump": target["toolchain"]["cc"].replace("gcc", "objdump"), "forks": ["hal_fork", "tsr_cluster_entry"],
            "entries": ["_start", "_cluster_start"],
            # the names the code generators give the functions they hand
            # hal_fork (codegen/layer, fused, patched, split, whole,
            # recurrent; tests/test_stack.py checks the generators)
            "handed": list(FORKED),
            "field": f"memory.{tiles}.reserved.stacks",
            "reserved": reserved, "cores": cores, "stacks": out}


def configure(env, target):
    tc = target["toolchain"]
    cross.require_tool(env, tc["cc"], target, "cc")
    cross.require_tool(env, tc["ar"], target, "ar")
    cross.require_tool(env, stacks(target)["objdump"], target, "cc")   # the link's stack check reads the ELF
    env.Tool("gcc")
    env.Tool("ar")
    env.Tool("as")
    # the archive carries its own index (s): no host ranlib on cross objects
    env.Replace(CC=tc["cc"], LINK=tc["cc"], AR=tc["ar"], ARFLAGS=["rcs"], RANLIBCOM="", OBJSUFFIX=".o")
    # TSR_HAL_DMA_RUNS: the HAL's short DMA entries for tile.h (tessera/hal.h)
    env.Replace(CFLAGS=list(tc["cflags"]) + PICOLIBC + ["-ffunction-sections", "-fdata-sections",
                                                        "-Wall", "-Wextra", "-Werror", "-DTSR_HAL_DMA_RUNS"])
    env.Replace(ASFLAGS=list(tc["cflags"]) + PICOLIBC)
    # no crt0 of picolibc's: the HAL starts the chip
    env.Replace(LINKFLAGS=list(tc["cflags"]) + PICOLIBC + ["-nostartfiles", "-Wl,--gc-sections",
                                                           "-Wl,--no-warn-rwx-segments"]
                + list(tc["ldflags"]))
    cross.check_flags(env, target)


def link(env, target, objects, libs, outdir):
    try:
        platform_arch = arch(target)
    except ConfigError as err:
        from .. import fail

        fail(err)
    return cross.firmware(env, target, platform_arch, objects, libs, outdir, stacks=stacks(target))
