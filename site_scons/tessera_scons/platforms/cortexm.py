"""Arm Cortex-M: arm-none-eabi-gcc with picolibc, semihosting for the
console, argv and the exit status (what QEMU's -semihosting gives), and a
linker script generated from the target YAML's memory levels."""

from tessera.codegen import linker

from . import cross

# picolibc's C library and its semihosting start-up (argv from the host,
# exit status back to it)
PICOLIBC = ["--specs=picolibc.specs"]
LINK_RUNTIME = ["--oslib=semihost", "--crt0=semihost", "-Wl,--gc-sections"]


def configure(env, target):
    tc = target["toolchain"]
    cross.require_tool(env, tc["cc"], target, "cc")
    cross.require_tool(env, tc["ar"], target, "ar")
    env.Tool("gcc")
    env.Tool("ar")
    # the archive carries its own index (s): no host ranlib on cross objects
    env.Replace(CC=tc["cc"], LINK=tc["cc"], AR=tc["ar"], ARFLAGS=["rcs"], RANLIBCOM="", OBJSUFFIX=".o")
    env.Replace(CFLAGS=list(tc["cflags"]) + PICOLIBC + ["-ffunction-sections", "-fdata-sections",
                                                        "-Wall", "-Wextra", "-Werror"])
    env.Replace(LINKFLAGS=list(tc["cflags"]) + PICOLIBC + LINK_RUNTIME + list(tc["ldflags"]))
    cross.check_flags(env, target)


def link(env, target, objects, libs, outdir):
    return cross.firmware(env, target, linker.CORTEX_M, objects, libs, outdir)
