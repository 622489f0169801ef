"""Code generation: one C file per layer (a fused step is generated as its
first layer's function, the others' files are empty halves), a file of
constants per layer with weights, and the network's files
(tessera.codegen).

target() is the code generator's view of the target; layer_view() all a
layer's file reads about the layer; group_inputs() which fused
candidates' tilings, views and plan slices each layer's file reads.
"""

from dataclasses import fields, is_dataclass

from ..codegen import linker
from ..config import views
from ..errors import TesseraError
from ..ir import Graph, Layer, Requant, Tensor
from ..planning import memplan
from ..util import canon
from ..util.cname import c_name


def target(tcfg, model_name, graph, counts_per_core=None):
    """The code generator's view of the target: the network's C prefix, its
    kernels and cores, the DMA engines between the levels, each level's
    section, where weights stop on their way (staging), where activations
    go when their level is full (spill), the storage level and the layers
    whose constants live there; `counts_per_core` is the platform's
    ("always" or "on request")."""
    place = tcfg["place"]
    cross = tcfg["toolchain"]["kind"] != "host"
    act = views.dma_engine(tcfg, place["activations"], place["tiles"])
    staging = views.weight_staging(tcfg)
    # weights reach the tiles directly, or through a staging level (GAP8's L2)
    wgt = views.dma_engine(tcfg, staging or place["weights"], place["tiles"])
    where = f"{tcfg['path']}: dma"
    for role in ("activations", "weights"):
        if place[role] == place["tiles"]:
            # a network's tiles are copied between two levels: the same
            # level twice is a wrong place.*, not a missing engine
            raise TesseraError(f"{tcfg['path']}: place.tiles", f"{place['tiles']!r} is also place.{role}",
                               f"tiles go to a faster level than {role}: place them in another level "
                               f"({', '.join(n for n in tcfg['memory'] if n != place['tiles'])})")
    if act is None:
        raise TesseraError(where, f"no DMA engine between {place['activations']} and {place['tiles']}",
                           "declare one in the target's dma list")
    if wgt is None:
        raise TesseraError(where, f"no DMA engine between {place['weights']} and {place['tiles']}",
                           "declare one in the target's dma list")
    cg = {
        "prefix": c_name(model_name),
        "kernels": tcfg["kernels"],
        "platform": tcfg["platform"],
        "cores": tcfg["cores"],
        "act_engine": act, "w_engine": wgt, "n_engines": len(tcfg["dma"]),
        "act_level": place["activations"], "w_level": place["weights"], "tile_level": place["tiles"],
        # cross targets place each level's data in its own section (see the
        # platform's linker script); the host has one flat memory
        "sections": linker.sections(place) if cross else {"weights": "", "activations": "", "tiles": ""},
    }
    if staging is not None:
        cg["w_stage"] = {"level": staging, "engine": views.dma_engine(tcfg, place["weights"], staging)}
    spill = views.activation_spill(tcfg)
    if spill is not None:
        # where activations go when the activation level cannot hold them all
        cg["spill"] = {"level": spill, "engine": views.dma_engine(tcfg, spill, place["activations"]),
                       "section": f".bss.tsr.{spill}" if cross else ""}
        if tcfg["memory"][spill]["kind"] == "storage":
            # not memory: a window the HAL reads as offsets on the card
            cg["spill"].update(section="", window=tcfg["memory"][spill]["address"])
    storage = views.storage_view(tcfg)
    if storage is not None:
        # the layers whose constants live on the card (known from their
        # sizes alone): their weight files are empty, storage.bin has them
        cg["storage"] = dict(storage, layers=sorted(memplan.storage_weights(graph, views.memory_target(tcfg))))
    if counts_per_core:
        cg["core_counts"] = counts_per_core
    if "xpulpv2" in tcfg["toolchain"].get("isa", ()):
        # the Xpulp kernels' build-time constants (layer_c: the depthwise's split)
        cg["xpulpv2"] = 1
    return cg


def has_constants(layer):
    """Whether a layer has a file of constants (weights, per-channel
    parameters)."""
    return bool(layer.weights or views.param_arrays(layer))


def library_files(graph, cg):
    """The network library's C files (in src/), as the code generation stage
    writes them: per layer its file and its constants', the storage
    program out of core, network.c (the test harness and its input are not
    in the library)."""
    files = []
    for layer in graph.layers:
        files.append(layer.name + ".c")
        if has_constants(layer):
            files.append(layer.name + "_w.c")
    if "storage" in cg:
        files.append("program.c")
    return files + ["network.c"]


def network_target(cg, guard_on):
    """What the network files read: guard=1 makes the harness guard the
    free bytes (only the network files change)."""
    return dict(cg, guard=1) if guard_on else cg


def storage_defines(tcfg, cg):
    """The compiler's definitions of the storage window: pointers in it are
    offsets on the card (tessera/hal.h)."""
    if "storage" not in cg:
        return []
    lvl = tcfg["memory"][cg["storage"]["level"]]
    return [("TSR_STORAGE_WINDOW", f"0x{lvl['address']:08x}u"), ("TSR_STORAGE_BYTES", f"0x{lvl['size']:08x}u")]


def _fields(obj):
    """dataclasses.asdict without its deep copy of every list (a layer's
    tables and per-channel lists; every invocation, the no-op too, makes a
    view of each layer): the IR nests dataclasses only as fields."""
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = _fields(v) if is_dataclass(v) else v
    return out


def layer_view(graph, layer):
    """Everything about one layer its code generation reads; index: the
    layer's place in the network (the out-of-core program names tiles by
    it)."""
    names = list(layer.inputs) + [layer.output]
    return {"model": graph.name, "layer": _fields(layer), "index": graph.layers.index(layer),
            "tensors": {n: _fields(graph.tensor(n)) for n in names}}


def layer_from_view(v):
    """(layer, a graph of it and its tensors) from a layer_view."""
    d = dict(v["layer"])
    if d.get("requant") is not None:
        d["requant"] = Requant(**d["requant"])
    layer = Layer(**d)
    return layer, Graph(v["model"], "", {n: Tensor(**t) for n, t in v["tensors"].items()}, [layer], [], [])


def group_inputs(solved, chains=()):
    """{layer: {"tilings": [candidate index], "others": [layer]}} for the
    first layer of each candidate with a fused tiling and of each chain a
    patched step may run (fusion/patch.py): its file may generate the
    step, so it reads every such candidate's tiling and the other layers'
    views and plan slices (a layer first in several candidates, a DW->PW
    pair and the same pair with its add epilogue: the step picks its
    group's)."""
    leads = {}
    for i, c in enumerate(solved):
        mine = leads.setdefault(c["layers"][0], {"tilings": [], "others": []})
        mine["tilings"].append(i)
        mine["others"] += [n for n in c["layers"][1:] if n not in mine["others"]]
    for names in chains:
        mine = leads.setdefault(names[0], {"tilings": [], "others": []})
        mine["others"] += [n for n in names[1:] if n not in mine["others"]]
    return leads


def _rq_splits(layers, graph, tgt, weights_npz):
    """{layer: tsr_requant_t.split} of the layers whose Xpulp depthwise can
    requantize without mulh (codegen/libraries/pulp_nn.py dw_split: known
    from the weights, which the layer view's digest stands for)."""
    if not weights_npz or not tgt.get("xpulpv2") or tgt["kernels"] != "pulp_nn":
        return {}
    from ..codegen.libraries import pulp_nn

    out = {}
    for lay in layers:
        if pulp_nn.splits_requant(lay, graph):
            arrays = canon.load_npz(weights_npz, [n for n in (lay.weights, lay.bias) if n])
            k = pulp_nn.layer_split(lay, arrays)
            if k:
                out[lay.name] = k
    return out


def layer_c(view, tiling, slice_, tgt, mine=None, rest=(), weights_npz=None):
    """src/<layer>.c. For a fusion candidate's layer, `mine` is its
    schedule slice and `rest` (a step's first layer) the candidates' fused
    tilings, then each other layer's view and plan slice: the file is the
    fused step, its empty half, or the layer itself. weights_npz: the
    network's weights (the depthwise's build-time requantization cut)."""
    from ..codegen import fused, layer as layer_code

    layer, graph = layer_from_view(view)
    group = mine if mine is not None and mine["kind"] != "layer" else None
    if group is not None and mine["first"] and mine["kind"] == "patch":
        return _patched_c(layer, graph, view, slice_, tgt, mine, rest, weights_npz)
    if group is not None and mine["first"]:
        ft = next(r for r in rest if r.get("group") == mine["step"])
        # a layer view holds the layer (a dict), a plan slice its name
        plans = {r["layer"]: r for r in rest if "group" not in r and isinstance(r.get("layer"), str)}
        parts = {}
        for r in rest:
            if isinstance(r.get("layer"), dict):
                lay, g = layer_from_view(r)
                parts[lay.name] = (lay, g)
        names = ft["layers"]
        members = [layer] + [parts[n][0] for n in names[1:]]
        tensors = dict(graph.tensors)
        for n in names[1:]:
            tensors.update(parts[n][1].tensors)
        every = Graph(view["model"], "", tensors, members, [], [])
        second, second_slice = members[1], plans[names[1]]
        splits = _rq_splits(members, every, tgt, weights_npz)
        if splits:
            tgt = dict(tgt, rq_split=splits)
        if ft["kind"] == "add":
            # an add epilogue: the layer's own loop on the epilogue's tiling
            return layer_code.generate(layer, every, ft["tiling"], slice_, tgt, view["model"],
                                       epilogue=(second, second_slice))
        if ft["kind"] in ("dw_pw_add", "pw_dw_add"):
            # a DW->PW or PW->DW step with its add epilogue
            return fused.generate(layer, second, every, ft, slice_, second_slice, tgt, view["model"],
                                  epilogue=(members[2], plans[names[2]]))
        return fused.generate(layer, second, every, ft, slice_, second_slice, tgt, view["model"])
    if group is not None:
        return fused.stub(layer, group["step"], view["model"], tgt["prefix"])
    if "storage" in tgt:
        tgt = dict(tgt, layer_index=view["index"])    # its tiles in the out-of-core program
    splits = _rq_splits([layer], graph, tgt, weights_npz)
    if splits:
        tgt = dict(tgt, rq_split=splits)
    return layer_code.generate(layer, graph, tiling, slice_, tgt, view["model"])


def _patched_c(layer, graph, view, slice_, tgt, mine, rest, weights_npz):
    """A patched step's file (codegen/patched.py): the other layers' views
    and plan slices come in `rest`."""
    from ..codegen import patched

    plans = {r["layer"]: r for r in rest if "group" not in r and isinstance(r.get("layer"), str)}
    plans[layer.name] = slice_
    parts = {}
    for r in rest:
        if isinstance(r.get("layer"), dict):
            lay, g = layer_from_view(r)
            parts[lay.name] = (lay, g)
    members = [layer] + [parts[n][0] for n in mine["layers"][1:]]
    tensors = dict(graph.tensors)
    for n in mine["layers"][1:]:
        tensors.update(parts[n][1].tensors)
    every = Graph(view["model"], "", tensors, members, [], [])
    splits = _rq_splits(members, every, tgt, weights_npz)
    if splits:
        tgt = dict(tgt, rq_split=splits)
    return patched.generate(mine, members, every, plans, tgt, view["model"])


def weights_c(view, tgt, weights_npz):
    """src/<layer>_w.c: the layer's constants, its own few arrays of the
    network's weights.npz."""
    from ..codegen import weights

    layer, graph = layer_from_view(view)
    arrays = canon.load_npz(weights_npz, [n for n in (layer.weights, layer.bias) if n])
    return weights.generate(layer, graph, arrays, tgt)


def network_c(graph, the_plan, tgt, inputs=None):
    """{file name: text} of network.h, network.c, harness.c and, with the
    golden input, input.c."""
    from ..codegen import network

    v = network.view(graph, the_plan, tgt)
    out = {"network.h": network.header(v), "network.c": network.source(v), "harness.c": network.harness(v)}
    if inputs is not None:
        out["input.c"] = network.golden_input(v, inputs)
    return out
