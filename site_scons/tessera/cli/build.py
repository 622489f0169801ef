"""tessera build: one network, the whole job (as `./scons target=T model=M`
in a checkout): tiling, memory plan, C, compilation, the run under the
target's runner and the bit-exact check, then the report."""

import subprocess

from .. import api
from ..errors import ConfigError


def register(sub):
    p = sub.add_parser(
        "build", help="build, run and check a network", description=__doc__.split("\n\n")[0],
        epilog="Variables (var=value): fusion=none|min_latency|min_transfer|min_memory, fusion_cost=model|measured, "
        "overlap=0, direct=0, patch=0, ram_cap=BYTES, guard=1, tile_cost=model, cache=DIR, cmsis_nn=DIR, verbose=1 (the "
        "compiler's command lines). `tessera list` shows the bundled targets and models; docs/embedding.md how a "
        "firmware's own build adds a network.")
    p.add_argument("--target", required=True, help="a bundled target (tessera list) or a target YAML file")
    p.add_argument("--model", required=True, help="a bundled model (tessera list) or a model YAML file")
    p.add_argument("--out", default="generated", help="where <target>/<model>/ goes (default: ./generated)")
    p.add_argument("-j", "--jobs", type=int, help="steps run in parallel (the output is the same)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--export", action="store_true",
                      help="also export the network for another firmware's build (<out>/<target>/<model>/export)")
    what.add_argument("--export-only", action="store_true",
                      help="only the network's files for another build: no compilation, no run (what CMake's "
                      "tessera_add_network runs)")
    p.add_argument("variables", nargs="*", metavar="var=value", help="the build's variables (below)")
    p.set_defaults(func=run)


def variables(words):
    out = {}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not name:
            raise ConfigError(word, "not a variable", "give var=value, e.g. fusion=none (tessera build --help)")
        out[name] = value
    return out


def run(args):
    cmd = api.scons_command(args.target, args.model, args.out, run=not args.export_only, export=args.export,
                            jobs=args.jobs, variables=variables(args.variables))
    return wait(subprocess.Popen(cmd))


def wait(proc):
    """The build's exit status. A terminal's Ctrl-C reaches SCons too (one
    process group), and SCons stops at a step's end and saves what it
    built: keep waiting for that, where subprocess.run would kill it a
    quarter of a second later, leaving a half-written tree and no
    signatures (CMake runs `tessera build --export-only` this way)."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue
