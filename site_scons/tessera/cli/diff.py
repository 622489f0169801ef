"""tessera diff: what changed between two builds, per step (tile, tiles,
L1 bytes, DMA bytes, counts; a pair fused in one build and apart in the
other is one row that says so), per memory level (the peak) and the
firmware's RAM and flash; a table, and the same as a self-contained HTML
page."""


def register(sub):
    p = sub.add_parser("diff", help="compare two builds' reports", description=__doc__)
    p.add_argument("a", help="report.json, or a build folder (<out>/<target>/<model>)")
    p.add_argument("b", help="the same for the other build")
    p.add_argument("--html", default="report_diff.html", help="where the HTML diff goes (default: %(default)s)")
    p.set_defaults(func=run)


def run(args):
    from ..report import diff

    html = diff.compare(args.a, args.b, args.html)
    print(f"HTML diff: {html}")
    return 0
