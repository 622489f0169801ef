"""The C files of a kernel library and of a platform's HAL, as the compile
stage and the export read them (the glue compiles them:
tessera_scons/kernels.py). A kernel library's files come from the `build:`
section of its library.yaml (absent: every .c file next to the library.yaml):

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

    libs = plan(name, library, variables)   # the library and its fallbacks
    files = hal_files(platform)
"""

import os

from ..config.views import KERNELS_DIR as KERNELS, kernel_library
from ..errors import ConfigError


def _build(library):
    b = dict(library.get("build") or {})
    b.setdefault("sources", ["."])
    b.setdefault("include", [])
    b.setdefault("defines", [])
    return b


def _c_files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".c"))


def _upstream_path(variables, up):
    """The checkout given with `<variable>=<path>`, validated; or None."""
    value = variables.get(up["variable"]) or ""
    if not value:
        return None
    path = os.path.abspath(os.path.expanduser(value))
    missing = [p for p in up["sources"] + up["include"] if not os.path.isdir(os.path.join(path, p))]
    if missing:
        raise ConfigError(f"{up['variable']}={value}", f"not a checkout of {up['name']} (no {missing[0]}/ in it)",
                          f"give the folder that holds {', '.join(up['include'] + up['sources'][:1])}")
    return path


def _export_path(path, checkout, name):
    if checkout and not os.path.abspath(path).startswith(KERNELS + os.sep):
        return "/".join(("kernels", name, "upstream", os.path.relpath(path, checkout).replace(os.sep, "/")))
    return "kernels/" + os.path.relpath(path, KERNELS).replace(os.sep, "/")


def _headers(folder, recursive):
    if not os.path.isdir(folder):
        return []
    if not recursive:
        return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".h")]
    out = []
    for d, dirs, files in os.walk(folder):
        dirs.sort()
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".h")]
    return out


def plan(name, library, variables):
    """The libraries that make up kernel library `name` (itself, then its
    fallback, ...), each as {name, id, sources: [(path, object name,
    export path)], include: [path], headers: [path], defines, cflags,
    upstream: bool (someone else's code), links: [ids]}. Export paths are
    relative to a network's export/ directory. `variables`: the build's
    ({"cmsis_nn": <path>} names an upstream checkout)."""
    build = _build(library)
    lib_dir = os.path.join(KERNELS, name)
    sources = list(build["sources"])
    include = [os.path.join(lib_dir, p) for p in build["include"]]
    defines = list(build["defines"])
    upstream = []   # (source path, object name) of the checkout's files
    up = build.get("upstream")
    checkout = _upstream_path(variables, up) if up else None
    if checkout:
        sources = [s for s in sources if s not in up["replaces"].get("sources", [])]
        include = [os.path.join(checkout, p) for p in up["include"]] + [
            os.path.join(lib_dir, p) for p in build["include"] if p not in up["replaces"].get("include", [])]
        defines += up.get("defines", [])
        for folder in up["sources"]:
            for f in _c_files(os.path.join(checkout, folder)):
                if not f.endswith(tuple(up.get("skip", []))):
                    upstream.append((os.path.join(checkout, folder, f), os.path.join("upstream", f[:-2] + ".o")))
    own, headers = [], []
    for folder in sources:
        src_dir = os.path.normpath(os.path.join(lib_dir, folder))
        sub = "" if folder == "." else folder.replace("/", "_") + "_"
        own += [(os.path.join(src_dir, f), sub + f[:-2] + ".o") for f in _c_files(src_dir)]
        headers += _headers(src_dir, False)
    for folder in include:
        headers += _headers(folder, True)
    fb = build.get("fallback")
    libs = [{
        "name": name, "id": f"kernels_{name}",
        "sources": [(src, obj, _export_path(src, checkout, name)) for src, obj in own],
        "upstream": [(src, obj, _export_path(src, checkout, name)) for src, obj in upstream],
        "include": include, "include_export": [_export_path(i, checkout, name) for i in include],
        "headers": [(h, _export_path(h, checkout, name)) for h in dict.fromkeys(headers)],
        "defines": defines, "cflags": list(build.get("cflags", [])),
        "links": [f"kernels_{fb}"] if fb else [],
    }]
    if fb:
        libs += plan(fb, kernel_library(fb), variables)
    return libs


def hal_files(platform):
    """The C and assembly sources of a platform's HAL (kernels/hal/<platform>/)."""
    hal_dir = os.path.join(KERNELS, "hal", platform)
    return [os.path.join(hal_dir, f) for f in sorted(os.listdir(hal_dir)) if f.endswith((".c", ".S"))]
