"""The network of CMake's tessera_add_network (cmake/tessera.cmake), known at
configure time, before anything is generated: the model stage runs (it is
what says which layers there are; cached as in any build), and the rest is
read off the graph, the target and the kernel libraries. CMake includes
the rendered file; its build then runs `tessera build --export-only`,
which writes <out>/<target>/<model>/export/ (only files whose content
changed, keeping the others' timestamps), and compiles the network from
there and the kernels from where tessera is installed.

    data = listing(target, model, out, variables)   # plain data
    text = render(data)                             # the CMake file
"""

import os

from .. import config
from ..config import views
from ..ir import Graph
from ..model import prepare
from ..pipeline import codegen, kernels, model as configuration
from ..pipeline.plan import upstream_variable
from ..util import canon, paths
from . import files as tx


def model_cache(out, variables):
    """Where generated models are kept: $TESSERA_MODEL_CACHE, the cache=
    folder's models/, else <out>/.models (as the SCons build has it)."""
    if os.environ.get("TESSERA_MODEL_CACHE"):
        return os.environ["TESSERA_MODEL_CACHE"]
    if variables.get("cache"):
        return os.path.join(os.path.abspath(os.path.expanduser(variables["cache"])), "models")
    return os.path.join(out, ".models")


def code_files():
    """tessera's Python code (the library and the SCons glue): the
    generator's own inputs, so that upgrading tessera regenerates."""
    out = []
    for package in ("tessera", "tessera_scons"):
        for d, dirs, names in os.walk(os.path.join(paths.SITE, package)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__" and x != "data")
            out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    return out


def listing(target, model, out, variables, log=None):
    """What tessera_add_network declares for (target, model) built into
    <out>/<target>/<model>/ with `variables` (the build's var=value)."""
    config.check_arguments(variables)
    tname, tpath = config.resolve("target", target, paths.DATA)
    mname, mpath = config.resolve("model", model, paths.DATA)
    tcfg, mcfg = configuration.load(tname, tpath, mname, mpath, variables.get("fusion") or None,
                                    variables.get("fusion_cost") or None)
    out = config.output_dir(out)
    outdir = os.path.join(out, tname, mname)
    files = prepare.prepare(mcfg, outdir, model_cache(out, variables), log=log or (lambda message: None))
    graph = Graph.from_json(canon.read_json(files["graph"]))
    cg = codegen.target(tcfg, mname, graph)
    library = views.kernel_library(tcfg["kernels"])
    up = upstream_variable(library)
    libs = kernels.plan(tcfg["kernels"], library, {up: variables.get(up)} if up else {})
    sources = ["src/" + f for f in codegen.library_files(graph, cg)]
    view, kfiles = tx.export_view(tcfg, mname, cg["prefix"], sources, libs, kernels.hal_files(tcfg["platform"]),
                                  paths.KERNELS)
    contents = {}
    for rel in view["kernel_files"]:
        with open(kfiles[rel], "rb") as f:
            contents[rel] = f.read()
    where = dict(kfiles, **{tx.PUBLIC_KERNEL_INCLUDE: os.path.join(paths.KERNELS, "include")})
    for lib in libs:
        where.update(zip(lib["include_export"], lib["include"]))
    exp = os.path.join(outdir, "export")
    vectors = ([f"test/input{i}.bin" for i in range(len(graph.inputs))]
               + [f"test/output{i}.bin" for i in range(len(graph.outputs))])
    model_files = prepare.source_files(mcfg)
    return {
        # the build's variables: a change rewrites this file, which the generation depends on
        "options": [f"{k}={v}" for k, v in sorted(variables.items())],
        "target": tname, "model": mname, "prefix": cg["prefix"], "outdir": outdir, "export_dir": exp,
        "sources": [os.path.join(exp, s) for s in sources],
        "header": os.path.join(exp, "include", cg["prefix"], "network.h"),
        "fragment": os.path.join(exp, tx.FRAGMENT),
        "vectors": [os.path.join(exp, v) for v in vectors],
        "links": [f"tessera::{lib['id']}" for lib in view["kernels"] if lib.get("direct")],
        # a change of these can change which files the network has: CMake configures again
        "configure_depends": [tpath] + model_files,
        "depends": [tpath] + model_files + code_files(),
        "kernels": tx.cmake_kernels(view, {lib["target"]: tx.kernel_digest(lib, contents) for lib in view["kernels"]},
                                    where, paths.KERNELS),
    }


def _list(name, items):
    return f"set({name}" + "".join(f'\n    "{i}"' for i in items) + ")\n"


def render(data):
    """The CMake file tessera_add_network includes: the network's files as
    variables (_tsr_*), then the kernel and HAL targets."""
    head = (f"# tessera: network {data['model']} on {data['target']}, for tessera_add_network "
            f"(cmake/tessera.cmake).\n# Written by `tessera cmake` when CMake configures; do not edit.\n\n")
    one = "".join(f'set(_tsr_{k} "{data[k]}")\n' for k in ("target", "model", "prefix", "outdir", "export_dir",
                                                           "header", "fragment"))
    many = "".join(_list(f"_tsr_{k}", data[k]) for k in ("options", "sources", "vectors", "links",
                                                          "configure_depends", "depends"))
    return head + one + many + "\n" + data["kernels"]
