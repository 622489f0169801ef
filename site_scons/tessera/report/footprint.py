"""Every byte of the linked firmware, per memory level: what the ELF
(pyelftools) and the linker's map (GNU ld -Map) say it holds, next to what
the plan declared.

    fp = footprint(read_elf(path), parse_map(text), levels, prefix, declared)

`levels`: the target's memory levels {name: {address, size, writable,
kind, reserved}} (not the storage level: a card is no memory region);
`declared`: what the memory plan says network.c declares
{symbol: bytes} (planning.memplan.declared_arrays). Result:

    {"levels": {level: {"size", "writable", "used", "parts": {part: bytes},
                        "reserved": {purpose: bytes},
                        "outside_sections": {purpose: bytes}}},   (cross targets)
     "ram": bytes used in writable levels, "flash": bytes used in read-only ones,
     "code": {owner: bytes}, "constants": {owner: bytes},
     "arrays": {symbol: {"bytes": in the ELF, "planned": in the plan}}}

A part is one of PARTS, or a platform's reserved area. Owners: network (the layers and network.c),
weights (the layers' constant files), kernels, hal, harness (the test
harness and its input, not part of a deployed network), runtime (start-up
code, the C library, libgcc). Bytes a level's sections take are counted
once (the union of their address ranges: .tbss and the room the script
keeps for it overlap), and every part's bytes sum to `used`. A level's
reservation the linker places no section for (a HAL's stacks at the top of
L1) is a part too (`outside_sections`): the firmware takes those bytes.
"""

import os
import re

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400

# reservations the linker script fills with sections of its own (codegen.linker)
LINKED = ("code", "data", "stack", "heap")
PARTS = ("weights", "activation arena", "tile arena", "spill arena", "code", "constants", "data", "bss",
         "heap", "stack", "data load image", "test harness", "alignment")
OWNERS = ("network", "weights", "kernels", "hal", "harness", "runtime")


def read_elf(path):
    """{"sections": [{name, addr, lma, size, flags, nobits}], "symbols":
    {name: size}, "addresses": {name: address}} of the allocated sections
    and the data and function symbols of a linked ELF."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        segments = [(s["p_vaddr"], s["p_paddr"], s["p_memsz"]) for s in elf.iter_segments()
                    if s["p_type"] == "PT_LOAD"]
        sections, symbols, addresses = [], {}, {}
        for sec in elf.iter_sections():
            flags = sec["sh_flags"]
            if flags & SHF_ALLOC and sec["sh_size"]:
                addr = sec["sh_addr"]
                lma = addr
                for vaddr, paddr, memsz in segments:
                    if vaddr <= addr < vaddr + memsz:
                        lma = paddr + addr - vaddr
                        break
                sections.append({"name": sec.name, "addr": addr, "lma": lma, "size": sec["sh_size"],
                                 "flags": flags, "nobits": sec["sh_type"] == "SHT_NOBITS"})
            if sec["sh_type"] == "SHT_SYMTAB":
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] in ("STT_OBJECT", "STT_FUNC") and sym["st_size"]:
                        symbols[sym.name] = sym["st_size"]
                        addresses[sym.name] = sym["st_value"]
    return {"sections": sections, "symbols": symbols, "addresses": addresses}


_IN = re.compile(r"^ (\S+)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*))?$")
_MORE = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")
_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)")
_OUT = re.compile(r"^(\.\S+|COMMON)(?:\s+0x[0-9a-fA-F]+\s+0x[0-9a-fA-F]+.*)?$")


def parse_map(text):
    """The input sections a GNU ld map places: [{"out", "in", "size",
    "file"}] with size > 0 (file "*fill*" for alignment padding)."""
    out, section, pending = [], None, None
    started = False
    for line in text.splitlines():
        if not started:
            started = line.startswith("Linker script and memory map")
            continue
        m = _OUT.match(line)
        if m:
            section, pending = m.group(1), None
            continue
        if section is None:
            continue
        m = _FILL.match(line)
        if m:
            if int(m.group(2), 16):
                out.append({"out": section, "in": "*fill*", "size": int(m.group(2), 16), "file": "*fill*"})
            pending = None
            continue
        m = _IN.match(line)
        if m and not m.group(1).startswith("*"):
            if m.group(2) is None:
                pending = m.group(1)
            else:
                pending = None
                if int(m.group(3), 16):
                    out.append({"out": section, "in": m.group(1), "size": int(m.group(3), 16),
                                "file": m.group(4).strip()})
            continue
        m = _MORE.match(line)
        if m and pending is not None:
            if int(m.group(2), 16):
                out.append({"out": section, "in": pending, "size": int(m.group(2), 16), "file": m.group(3).strip()})
            pending = None
            continue
        pending = None
    return out


def owner(path, prefix):
    """Who brought an input file into the program (see OWNERS)."""
    if path == "*fill*":
        return "alignment"
    base = os.path.basename(path)
    member = re.match(r"(.*)\((.*)\)$", base)
    archive = member.group(1) if member else ""
    parts = path.replace("\\", "/").split("/")
    # the build's objects: <out>/<target>/<model>/obj/{kernels/<library>/,hal/,}<file>.o
    inside = parts[len(parts) - parts[::-1].index("obj"):] if "obj" in parts[:-1] else []
    if archive == "libtessera_kernels.a" or inside[:1] == ["kernels"]:
        return "kernels"
    if archive == "libtessera_hal.a" or inside[:1] == ["hal"]:
        return "hal"
    if archive == f"libtessera_{prefix}.a" or (not archive and len(inside) == 1):
        name = member.group(2) if member else base
        if name in ("harness.o", "input.o"):
            return "harness"
        return "weights" if name.endswith("_w.o") else "network"
    return "runtime"


def _kind(name):
    """An input section's content: code or constants (read-only)."""
    if name.startswith((".text", ".init", ".fini")) and not name.startswith(".init_array"):
        return "code"
    return "constants"


def _region(levels, addr):
    for name, lvl in levels.items():
        if lvl["address"] <= addr < lvl["address"] + lvl["size"]:
            return name
    return None


def _union(ranges):
    total, end = 0, None
    for a, b in sorted(ranges):
        if end is None or a >= end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _section_part(name, arena_sections):
    """What an output section holds: None for an arena section (its
    arrays say), a part for the runtime's own sections, or "mapped" (the
    link map's input sections say, by owner and kind)."""
    if name in arena_sections:
        return None
    if name in (".heap", ".stack"):
        return name[1:]
    if name.startswith(".tsr_"):
        return name[5:]          # a platform's reserved area (stacks of the other cores, ...)
    if name in (".data", ".tdata", ".sdata", ".igot.plt", ".got"):
        return "data"
    if name.startswith((".bss", ".tbss", ".sbss")):
        return "bss"
    return "mapped"


def _mapped_part(entry, prefix):
    who = owner(entry["file"], prefix)
    if who in ("alignment", "weights"):
        return who
    if who == "harness":
        return "test harness"
    return _kind(entry["in"])


def footprint(elf, entries, levels, prefix, declared):
    """See the module docstring. A platform's reserved area with a section
    of its own (.tsr_<name>) is a part of that name."""
    syms = elf["symbols"]
    arrays = {s: {"bytes": syms.get(s, 0), "planned": n} for s, n in sorted(declared.items())}
    code, consts = dict.fromkeys(OWNERS, 0), dict.fromkeys(OWNERS, 0)
    by_out = {}
    for e in entries:
        by_out.setdefault(e["out"], []).append(e)
    out_names = {s["name"] for s in elf["sections"]}
    for e in entries:
        if e["out"] not in out_names or e["out"].startswith(".bss.tsr.") or e["file"] == "*fill*":
            continue
        if _section_part(e["out"], ()) != "mapped":
            continue
        who = owner(e["file"], prefix)
        (code if _kind(e["in"]) == "code" and who != "weights" else consts)[who] += e["size"]
    result = {"code": {k: v for k, v in code.items() if v}, "constants": {k: v for k, v in consts.items() if v},
              "arrays": arrays}
    if not levels:
        return result          # a native program: no memory regions to count
    arena_kind = {f"{prefix}_L2": "activation arena", f"{prefix}_L1": "tile arena"}
    arena_sections = {s["name"] for s in elf["sections"] if s["name"].startswith(".bss.tsr.")}
    out = {name: {"size": lvl["size"], "writable": lvl["writable"], "kind": lvl["kind"], "used": 0, "parts": {},
                  "reserved": dict(lvl.get("reserved", {}))} for name, lvl in levels.items()}
    ranges = {name: [] for name in levels}

    def add(level, part, n):
        if level is not None and n:
            out[level]["parts"][part] = out[level]["parts"].get(part, 0) + n

    for s in elf["sections"]:
        if s["flags"] & SHF_TLS and s["nobits"]:
            continue            # .tbss: the script keeps its room as .tbss_space
        level = _region(levels, s["addr"])
        if level is None:
            continue
        ranges[level].append((s["addr"], s["addr"] + s["size"]))
        if not s["nobits"] and s["lma"] != s["addr"]:
            load = _region(levels, s["lma"])
            if load is not None and load != level:
                ranges[load].append((s["lma"], s["lma"] + s["size"]))
                add(load, "data load image", s["size"])
        part = _section_part(s["name"], arena_sections)
        if part is None:
            # an arena section: its symbols are the arrays network.c declares
            placed = 0
            for sym in declared:
                if syms.get(sym) and _symbol_in(elf, sym, s):
                    add(level, arena_kind.get(sym, "spill arena"), syms[sym])
                    placed += syms[sym]
            add(level, "alignment", s["size"] - placed)
        elif part == "mapped":
            placed = 0
            for e in by_out.get(s["name"], []):
                add(level, _mapped_part(e, prefix), e["size"])
                placed += e["size"]
            add(level, "alignment", s["size"] - placed)
        else:
            add(level, part, s["size"])
    sections = {s["name"] for s in elf["sections"]}
    for name, m in out.items():
        m["used"] = _union(ranges[name])
        # bytes a level reserves for the platform outside any section (the
        # other cores' stacks a HAL puts at the top of L1): the firmware
        # takes them all the same
        for purpose, n in m["reserved"].items():
            if purpose not in LINKED and f".tsr_{purpose}" not in sections and n:
                m["parts"][purpose] = m["parts"].get(purpose, 0) + n
                m["used"] += n
                m.setdefault("outside_sections", {})[purpose] = n
        # sections padded past each other (the tbss room inside .bss's alignment)
        over = sum(m["parts"].values()) - m["used"]
        if over:
            m["parts"]["alignment"] = m["parts"].get("alignment", 0) - over
        m["parts"] = {p: n for p, n in sorted(m["parts"].items(), key=lambda kv: _order(kv[0])) if n}
    result["levels"] = out
    result["ram"] = sum(m["used"] for m in out.values() if m["writable"])
    result["flash"] = sum(m["used"] for m in out.values() if not m["writable"])
    return result


def _order(part):
    return (PARTS.index(part) if part in PARTS else len(PARTS), part)


def _symbol_in(elf, sym, section):
    """Whether `sym` lies in `section` (the ELF's symbol addresses)."""
    return sym in elf.get("addresses", {}) and \
        section["addr"] <= elf["addresses"][sym] < section["addr"] + section["size"]
