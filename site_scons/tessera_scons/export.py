"""The `export` step: a network's sources, kernels and HAL copied into
<outdir>/export/ with the CMake files, manifest and linker fragment that
tessera.export renders (see there for the layout).

Every file reaches export/ through env.InstallAs, which copies a file only
when its content changed and keeps the source's timestamp: a consumer's
Make or Ninja build recompiles exactly the sources that changed. The
generated files are rendered into <outdir>/.export/ first and installed
from there for the same reason (a re-render with the same bytes installs
nothing).

    exp = declare(env, tcfg, model, prefix, outdir, sources, header, libs, hal_files, graph, paths)
"""

import os

from SCons.Script import Action

from tessera.util import canon
from tessera.export import files as tx
from tessera.config.views import KERNELS_DIR as KERNELS


# the library code each export step runs, and this file (see steps.CODE)
_LIBRARY = ("export", "check", "config", "errors", "ir", "util")
CODE = {"render": _LIBRARY, "vectors": _LIBRARY}


def _code(step):
    return canon.source_files(*CODE[step]) + [os.path.abspath(__file__)]


def declare(env, tcfg, model, prefix, outdir, sources, header, libs, hal_files, graph, paths):
    """Declare export/ for the network whose library sources are `sources`
    (generated C nodes, test harness excluded) and public header `header`;
    `libs` is kernels.plan(); `hal_files` the platform's HAL sources;
    `paths` prepare's files (graph, input, golden) for the test vectors.
    Returns {dir, nodes, include, headers (the headers in include), ld_dir, fragment, manifest}."""
    exp = os.path.join(outdir, "export")
    stage = os.path.join(outdir, ".export")
    net_rel = ["src/" + os.path.basename(str(s)) for s in sources]
    view, kfiles = tx.export_view(tcfg, model, prefix, net_rel, libs, hal_files, KERNELS)
    staged = [os.path.join(stage, *rel.split("/")) for rel in
              ("CMakeLists.txt", tx.KERNELS_CMAKE, tx.FRAGMENT, tx.MANIFEST)]
    value = env.Value(canon.dumps(view))
    rendered = env.Command(staged, [value] + [kfiles[rel] for rel in view["kernel_files"]] + list(sources),
                           Action(render, "tessera: export $TARGET"))
    env.Depends(rendered, _code("render"))
    vec_rel = ([f"test/input{i}.bin" for i in range(len(graph.inputs))]
               + [f"test/output{i}.bin" for i in range(len(graph.outputs))])
    vectors = env.Command([os.path.join(stage, *rel.split("/")) for rel in vec_rel],
                          [paths["graph"], paths["input"], paths["golden"]],
                          Action(write_vectors, "tessera: export $TARGET"))
    env.Depends(vectors, _code("vectors"))
    copies = [(rel, s) for rel, s in zip(net_rel, sources)]
    copies += list(zip(vec_rel, vectors))
    copies.append((f"include/{prefix}/network.h", header))
    copies += [(rel, kfiles[rel]) for rel in view["kernel_files"]]
    copies += list(zip(("CMakeLists.txt", tx.KERNELS_CMAKE, tx.FRAGMENT, tx.MANIFEST), rendered))
    nodes = []
    for rel, src in copies:
        nodes += env.InstallAs(os.path.join(exp, *rel.split("/")), src)
    # a copy: fetching it from a cache would gain nothing and would give it
    # the cache's timestamp rather than its source's
    env.NoCache(nodes)
    by_rel = dict(zip([rel for rel, _ in copies], nodes))
    return {"dir": exp, "nodes": nodes, "include": [os.path.join(exp, "include"), os.path.join(exp, "kernels", "include")],
            "ld_dir": os.path.join(exp, "ld"), "fragment": by_rel[tx.FRAGMENT], "manifest": by_rel[tx.MANIFEST],
            "headers": [n for rel, n in by_rel.items() if rel.endswith(".h") and rel.startswith(("include/",
                                                                                               "kernels/include/"))]}


def render(target, source, env):
    from . import steps

    return steps.guarded(_render, target, source, env)


def _render(target, source, env):
    import json

    view = json.loads(source[0].read())
    n = len(view["kernel_files"])
    contents = {rel: node.get_contents() for rel, node in zip(view["kernel_files"], source[1:1 + n])}
    contents.update({rel: node.get_contents() for rel, node in zip(view["sources"], source[1 + n:])})
    files = tx.render(view, contents)
    for node, rel in zip(target, ("CMakeLists.txt", tx.KERNELS_CMAKE, tx.FRAGMENT, tx.MANIFEST)):
        canon.write_atomic(str(node), files[rel])


def write_vectors(target, source, env):
    from . import steps

    return steps.guarded(_write_vectors, target, source, env)


def _write_vectors(target, source, env):
    from tessera.ir import Graph

    graph = Graph.from_json(canon.read_json(str(source[0])))
    files = tx.test_vectors(graph, canon.load_npz(str(source[1])), canon.load_npz(str(source[2])))
    for node in target:
        rel = "/".join(str(node).replace(os.sep, "/").split("/")[-2:])
        canon.write_atomic(str(node), files[rel])
