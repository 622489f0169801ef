"""The build of one network, stage by stage, as plain functions over plain
data. For each stage: what its steps read (projections of the target, the
model and the graph, with the build's options) and the work one of its
steps does (plain data in, plain data out). The SCons glue
(site_scons/tessera_scons/) turns the first into Value nodes and calls
the second from its actions; it decides nothing itself. The algorithms
live in the stage packages; a module here is a stage's face to the build.

    model     the configuration: target and model YAML, fusion defaults
    tiling    the tiler's views (which layers in row bands, which write
              to storage) and one solve per layer            (tiler)
    fusion    candidates, the fused scheme, fused tilings, the selector
                                                              (fusion)
    budget    ram_cap: the tile budget whose plan fits        (planning)
    plan      the memory view (which layers run in place) and the plan
                                                              (planning)
    codegen   the C of each step, its constants, the network  (codegen)
    program   the out-of-core program and its C               (storage)
    check     the run and the layer-by-layer verdict          (runners, check)
    report    report.json, report.html                        (report)

docs/architecture.md draws the pipeline with the module behind each box.
"""

# how the build's switches read (SConstruct's overlap=, direct=, guard=)
OFF = ("0", "no", "false")


def on(value):
    """overlap=, direct= and chw=: on unless 0, no or false (default on)."""
    return str(value) not in OFF


def on_if_given(value):
    """guard=: off unless given as something other than 0, no or false."""
    return str(value) not in OFF + ("",)
