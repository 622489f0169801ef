"""The host platform: the machine's own gcc, a native executable."""

import os

from SCons.Script import Action
from tessera.codegen import linker

from . import cross


def configure(env, target):
    tc = target["toolchain"]
    env.Tool("gcc")
    env.Tool("ar")
    env.Tool("gnulink")
    env.Replace(CC=tc["cc"], LINK=tc["cc"], AR=tc["ar"])
    env.Replace(CFLAGS=list(tc["cflags"]) + ["-Wall", "-Wextra", "-Werror"])
    cross.require_tool(env, tc["cc"], target, "cc")
    cross.require_tool(env, tc["ar"], target, "ar")
    cross.check_flags(env, target)
    env.Replace(LINKFLAGS=list(tc["ldflags"]))


def link(env, target, objects, libs, outdir):
    """The executable and its link map (what the report counts code by)."""
    prog = env.Program([os.path.join(outdir, "firmware"), os.path.join(outdir, "firmware.map")], objects + libs,
                       LINKFLAGS=env["LINKFLAGS"] + ["-Wl,-Map=${TARGETS[1]}"])
    env.AddPostAction(prog, Action(_relative_map, None))     # quiet: part of the link
    return prog[:1]


def _relative_map(target, source, env):
    linker.relative_map(str(target[1]))
