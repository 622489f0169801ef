"""The C files of a kernel library, from the `build:` section of its
library.yaml (absent: every .c file next to the library.yaml):

    build:
      sources: [".", "arm"]     folders whose .c files are compiled
      include: ["include"]      include folders
      defines: [NAME, ...]
      cflags: [...]             compiler flags of this library's files
      fallback: reference       a library compiled in too, for the layers
                                the adapter gives to it
      upstream:                 the same API from a checkout named on the
        variable: cmsis_nn      command line (`cmsis_nn=<path>`), compiled
        name: ARM CMSIS-NN      in place of `replaces`
        replaces: {sources: [...], include: [...]}
        sources: [...]          folders of the checkout
        include: [...]
        defines: [...]
        skip: ["_f32.c"]        file name endings left out

    objs = objects(env, name, library, obj_dir)
"""

import os

from tessera.errors import ConfigError
from tessera.views import KERNELS_DIR as KERNELS


def _build(library):
    b = dict(library.get("build") or {})
    b.setdefault("sources", ["."])
    b.setdefault("include", [])
    b.setdefault("defines", [])
    return b


def _c_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".c"))


def _upstream_path(env, up):
    """The checkout given with `<variable>=<path>`, validated; or None."""
    value = env.get(up["variable"]) or ""
    if not value:
        return None
    path = os.path.abspath(os.path.expanduser(value))
    missing = [p for p in up["sources"] + up["include"] if not os.path.isdir(os.path.join(path, p))]
    if missing:
        raise ConfigError(f"{up['variable']}={value}", f"not a checkout of {up['name']} (no {missing[0]}/ in it)",
                          f"give the folder that holds {', '.join(up['include'] + up['sources'][:1])}")
    return path


def objects(env, name, library, obj_dir):
    """Declare the objects of kernel library `name` (and of its fallback);
    returns the object nodes."""
    from tessera.views import kernel_library

    from . import fail

    try:
        return _objects(env, name, library, obj_dir, kernel_library)
    except ConfigError as err:
        fail(err)


def _objects(env, name, library, obj_dir, load):
    build = _build(library)
    lib_dir = os.path.join(KERNELS, name)
    sources = list(build["sources"])
    include = [os.path.join(lib_dir, p) for p in build["include"]]
    defines = list(build["defines"])
    upstream = []   # (source path, object path) of the checkout's files
    up = build.get("upstream")
    checkout = _upstream_path(env, up) if up else None
    if checkout:
        sources = [s for s in sources if s not in up["replaces"].get("sources", [])]
        include = [os.path.join(checkout, p) for p in up["include"]] + [
            os.path.join(lib_dir, p) for p in build["include"] if p not in up["replaces"].get("include", [])]
        defines += up.get("defines", [])
        for folder in up["sources"]:
            for f in _c_files(os.path.join(checkout, folder)):
                if not f.endswith(tuple(up.get("skip", []))):
                    upstream.append((os.path.join(checkout, folder, f),
                                     os.path.join(obj_dir, name, "upstream", f[:-2] + ".o")))
    kenv = env.Clone()
    kenv.Append(CPPPATH=include, CPPDEFINES=defines, CFLAGS=list(build.get("cflags", [])))
    objs = []
    for folder in sources:
        src_dir = os.path.normpath(os.path.join(lib_dir, folder))
        sub = "" if folder == "." else folder.replace("/", "_") + "_"
        for f in _c_files(src_dir):
            objs.append(kenv.Object(os.path.join(obj_dir, name, sub + f[:-2] + ".o"), os.path.join(src_dir, f))[0])
    if upstream:
        # someone else's code: their warnings are not ours to fail on
        uenv = kenv.Clone()
        uenv.Replace(CFLAGS=[f for f in uenv["CFLAGS"] if f != "-Werror"] + ["-w"])
        objs += [uenv.Object(obj, src)[0] for src, obj in upstream]
    if build.get("fallback"):
        fb = build["fallback"]
        objs += _objects(env, fb, load(fb), obj_dir, load)
    return objs
