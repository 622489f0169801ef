"""tessera cmake: the file CMake's tessera_add_network includes when it
configures (cmake/tessera.cmake runs this; a person needs it only to see
what a network will hold): the network's sources, header, linker fragment
and test vectors in <out>/<target>/<model>/export/, what regenerates them,
and the kernel and HAL targets. Runs the model stage (cached); generates
nothing else."""

import os

from ..util import canon
from .build import variables


def register(sub):
    p = sub.add_parser("cmake", help="the file CMake's tessera_add_network includes (used by its CMake module)",
                       description=__doc__)
    p.add_argument("--target", required=True, help="a bundled target or a target YAML file")
    p.add_argument("--model", required=True, help="a bundled model or a model YAML file")
    p.add_argument("--out", required=True, help="where <target>/<model>/ goes")
    p.add_argument("--write", required=True, metavar="FILE", help="the CMake file to write (only when it changes)")
    p.add_argument("variables", nargs="*", metavar="var=value", help="the build's variables (tessera build --help)")
    p.set_defaults(func=run)


def run(args):
    from ..export import cmake

    text = cmake.render(cmake.listing(args.target, args.model, args.out, variables(args.variables),
                                      log=lambda message: print(f"tessera: {message}", flush=True)))
    try:
        with open(args.write) as f:
            same = f.read() == text
    except OSError:
        same = False
    if not same:
        canon.write_atomic(os.path.abspath(args.write), text)
    return 0
