"""The host platform: the machine's own gcc, a native executable."""

import os

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
    return env.Program(os.path.join(outdir, "firmware"), objects + libs)
