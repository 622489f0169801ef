"""tessera list: the bundled targets and models."""


def register(sub):
    p = sub.add_parser("list", help="the bundled targets and models", description=__doc__)
    p.set_defaults(func=run)


def run(args):
    from ..report.listing import print_targets_and_models
    from ..util import paths

    print_targets_and_models(paths.DATA)
    return 0
