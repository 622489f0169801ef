"""The host platform: the machine's own gcc, a native executable."""

import os


def configure(env, target):
    tc = target["toolchain"]
    env.Tool("gcc")
    env.Tool("ar")
    env.Tool("gnulink")
    env.Replace(CC=tc["cc"], LINK=tc["cc"], AR=tc["ar"])
    env.Replace(CFLAGS=list(tc["cflags"]) + ["-Wall", "-Wextra", "-Werror"])
    env.Replace(LINKFLAGS=list(tc["ldflags"]))


def link(env, target, objects, libs, outdir):
    return env.Program(os.path.join(outdir, "firmware"), objects + libs)
