"""The kernel libraries' objects, compiled with the target's toolchain; which
files and flags they are is tessera.pipeline.kernels (library.yaml's
`build:` section).

    libs = plan(env, name, library)        # the library and its fallbacks
    objs = objects(env, name, library, obj_dir)
"""

import os

from tessera.errors import ConfigError
from tessera.pipeline import kernels
from tessera.pipeline.plan import upstream_variable


def plan(env, name, library):
    """tessera.pipeline.kernels.plan with the build's variable naming an
    upstream checkout (cmsis_nn=); a bad one stops the build in one line."""
    from . import fail

    up = upstream_variable(library)
    try:
        return kernels.plan(name, library, {up: env.get(up)} if up else {})
    except ConfigError as err:
        fail(err)


def objects(env, name, library, obj_dir):
    """Declare the objects of kernel library `name` (and of its fallback);
    returns the object nodes."""
    objs = []
    for lib in plan(env, name, library):
        kenv = env.Clone()
        kenv.Append(CPPPATH=lib["include"], CPPDEFINES=lib["defines"], CFLAGS=lib["cflags"])
        objs += [kenv.Object(os.path.join(obj_dir, lib["name"], obj), src)[0] for src, obj, _ in lib["sources"]]
        if lib["upstream"]:
            # someone else's code: their warnings are not ours to fail on
            uenv = kenv.Clone()
            uenv.Replace(CFLAGS=[f for f in uenv["CFLAGS"] if f != "-Werror"] + ["-w"])
            objs += [uenv.Object(os.path.join(obj_dir, lib["name"], obj), src)[0]
                     for src, obj, _ in lib["upstream"]]
    return objs
