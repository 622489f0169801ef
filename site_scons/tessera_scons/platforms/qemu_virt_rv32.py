"""QEMU's RV32 `virt` machine as a GAP8-like cluster: riscv64-unknown-elf-gcc
for RV32IMC with picolibc (semihosting for the console, argv and the exit
status), a linker script generated from the target YAML's memory levels
(each level a region of QEMU's RAM at its own address, with its real size),
and the HAL in kernels/hal/qemu_virt_rv32/: hart 0 is the fabric
controller, harts 1..cores the cluster cores.

Stacks: the fabric controller's is the YAML's `stack` reservation (picolibc's
__stack); the cluster cores share `stacks` (a reservation of the same level
the linker lays out as an area), split evenly, 16-byte aligned.
"""

import re

from tessera.config import views
from tessera.errors import ConfigError, TesseraError

from . import cross
from .cortexm import LINK_RUNTIME, PICOLIBC

# the HAL counts each cluster core's instructions (hal_core_counts) and the
# emulated DMA copies' (hal_dma_copy_count); the test harness prints them
COUNTS_PER_CORE = "on request"


def _smp(target):
    args = target["runner"]["args"]
    for i, a in enumerate(args):
        if a == "-smp" and i + 1 < len(args):
            m = re.match(r"(?:cpus=)?(\d+)", args[i + 1])
            if m:
                return int(m.group(1))
    return 1


def arch(target):
    """The linker script's platform part (see tessera.codegen.linker)."""
    stacks = [lvl["reserved"]["stacks"] for lvl in target["memory"].values() if "stacks" in lvl["reserved"]]
    per_core = (stacks[0] // target["cores"]) // 16 * 16 if stacks else 0
    return {
        "entry": "_tsr_entry",
        "output_arch": "riscv",
        # _tsr_entry first: every hart starts there and sorts itself out
        "startup": [".text.tsr.entry", ".text.init.enter", ".init", ".init.*"],
        "areas": ["stacks"],
        # activations the activation level cannot hold move to this one
        "sections": [f".bss.tsr.{lvl}" for lvl in [views.activation_spill(target)] if lvl],
        "symbols": {"__tsr_cluster_stacks_top": "__tsr_stacks_end",
                    "__tsr_cluster_stack_size": str(per_core)},
        "discard": [],
    }


def check(target):
    """ConfigError when the target cannot run on this platform."""
    where = target["path"]
    harts = _smp(target)
    if target["cores"] + 1 > harts:
        raise ConfigError(where, f"cores: {target['cores']} cluster cores need {target['cores'] + 1} harts "
                          f"(one more for the fabric controller) but runner.args give -smp {harts}",
                          f"set -smp {target['cores'] + 1} in runner.args or lower cores")
    per_core = arch(target)["symbols"]["__tsr_cluster_stack_size"]
    if int(per_core) < 512:
        raise ConfigError(where, f"memory: reserved `stacks` give each of the {target['cores']} cluster cores "
                          f"{per_core} bytes of stack", "reserve at least 512 bytes per core")


def configure(env, target):
    tc = target["toolchain"]
    try:
        check(target)
    except TesseraError as err:
        from .. import fail

        fail(err)
    cross.require_tool(env, tc["cc"], target, "cc")
    cross.require_tool(env, tc["ar"], target, "ar")
    env.Tool("gcc")
    env.Tool("ar")
    env.Tool("as")
    env.Replace(CC=tc["cc"], AS=tc["cc"], LINK=tc["cc"], AR=tc["ar"], ARFLAGS=["rcs"], RANLIBCOM="",
                OBJSUFFIX=".o")
    env.Replace(CFLAGS=list(tc["cflags"]) + PICOLIBC + ["-ffunction-sections", "-fdata-sections",
                                                        "-Wall", "-Wextra", "-Werror"])
    # .S goes through the C preprocessor with the same machine flags
    env.Replace(ASPPFLAGS=list(tc["cflags"]) + PICOLIBC + ["-c"], ASPPCOM="$CC $ASPPFLAGS $_CPPDEFFLAGS "
                "$_CPPINCFLAGS -o $TARGET $SOURCES")
    # integer-only printf (the harness prints nothing else); one region per
    # level with code and data in L2 is RWX by design
    env.Replace(LINKFLAGS=list(tc["cflags"]) + PICOLIBC + LINK_RUNTIME + list(tc["ldflags"])
                + ["-DPICOLIBC_INTEGER_PRINTF_SCANF", "-Wl,--no-warn-rwx-segments"])
    cross.check_flags(env, target)


def link(env, target, objects, libs, outdir):
    return cross.firmware(env, target, arch(target), objects, libs, outdir)
