"""GNU ld linker scripts from a target's memory levels.

The target YAML is the memory map: every level is one MEMORY region at its
`address`, with exactly the `size` the YAML gives (the emulator may have more
memory there; a region that keeps the real chip's size makes an overflow fail
at build time, named, instead of running on memory the chip lacks).

    view = linker.view(target, arch)   # what the link-script step reads
    text = linker.script(view)         # the script (deterministic text)

What goes where:
- tessera's own data, one output section per level and kind, named as the
  generated C names them (`sections(place)`): weights `.rodata.tsr.<level>`
  (loaded where they are: flash, or RAM an ELF loader fills), activation and
  tile arenas `.bss.tsr.<level>` (NOLOAD: every byte is written before it is
  read). Their sizes are the memory plan's, already checked against the
  level's usable bytes (size minus reserved).
- the C program itself, in the bytes each level reserves, by purpose
  (`memory.<level>.reserved` in the target YAML):
      code    start-up code and vector table, .text, .rodata and the load
              image of .data (exactly one level)
      data    .data, thread-local data and .bss of the C runtime and HAL
              (exactly one level, writable)
      stack   the main stack (exactly one level, writable); __stack is its top
      heap    malloc's arena (optional; none when no level reserves it)
  Other reserved keys (e.g. `stacks` of a multi-core platform) are bytes the
  linker leaves to the platform. An ASSERT per purpose fails the link with a
  line starting `tessera-linker:` naming the level and YAML key to change
  (`link_error` turns ld's output into that one line).

What the platform and its C runtime need is the `arch` dict (see CORTEX_M for
Arm with picolibc; a RISC-V platform passes its own):
    entry       the ELF entry symbol
    startup     input sections placed first at the code level's origin, in
                order (a Cortex-M vector table must sit at address 0)
    symbols     extra {symbol: ld expression} PROVIDEd after the sections
    discard     input sections dropped (e.g. unwinding tables)
    output_arch optional OUTPUT_ARCH
    sections    optional: more of tessera's sections the platform needs placed
                (`.bss.tsr.<level>`: activations moved to a slower level)
    areas       optional: other reserved keys the platform wants as NOLOAD
                areas (e.g. `stacks` of a multi-core platform); each gets a
                section `.tsr_<key>` of those bytes in its level, between
                symbols __tsr_<key>_start and __tsr_<key>_end, holding the
                input sections `.tsr_<key>.*` (a HAL's variables kept in
                fast memory; never initialized: the HAL clears them)
    code_layout optional: {align, first, last[, each]} for a platform whose
                instruction caches make the cycles depend on where code
                sits (PULP-open: 512-byte L0 per core, 4 kB shared, random
                replacement): .text starts at a multiple of `align` bytes,
                the input files matching `first` (HAL, kernel library) come
                first in that order and those matching `last` (test harness,
                C library) last, so the kernels' and the HAL's addresses
                modulo the caches do not move when the activation arena
                before .text, the harness or another layer's code changes;
                with `each`, every member of an archive in `first` (the
                view's `members`: archive pattern -> member names) starts
                at a multiple of `each` bytes, so that one kernel's code
                growing does not move the next kernels in the caches
The .data/.tdata/.tbss/.bss symbols are the ones picolibc's crt0 reads
(__data_source, __data_start, __data_size, __bss_start, __bss_size,
__tls_base, __heap_start, __heap_end, __stack, ...).
"""

from ..errors import ConfigError

PURPOSES = ("code", "data", "stack", "heap")
REQUIRED = ("code", "data", "stack")

# Cortex-M with picolibc: its crt0 puts the vector table in
# .data.init.enter and the reset code in .text.init.enter; Arm EABI TLS puts
# an 8-byte TCB before the TLS block.
CORTEX_M = {
    "entry": "_start",
    "output_arch": "arm",
    "startup": [".text.init.enter", ".data.init.enter", ".init", ".init.*"],
    "symbols": {"__arm32_tls_tcb_offset": "MAX(8, __tls_align)"},
    "discard": [".ARM.exidx*", ".ARM.extab*", ".gnu.linkonce.armextab.*"],
}


def sections(place):
    """Section names of tessera's data, by role (what codegen puts in the C)."""
    return {
        "weights": f".rodata.tsr.{place['weights']}",
        "activations": f".bss.tsr.{place['activations']}",
        "tiles": f".bss.tsr.{place['tiles']}",
    }


def view(target, arch, members=None):
    """The linker step's input: regions, reservations and tessera's sections
    of `target` (a loaded target YAML), with the platform's `arch` and, for
    a code_layout with `each`, the archives' `members` ({pattern: [member
    file names]}, in the archive's order). Raises ConfigError naming the
    YAML field when the map cannot be linked."""
    path = target["path"]
    levels = target["memory"]
    regions = []
    for name, lvl in levels.items():
        if lvl["kind"] == "storage":
            continue    # not memory: a window of offsets on the card (tessera/hal.h)
        if lvl.get("address") is None:
            raise ConfigError(path, f"memory.{name}.address: missing",
                              f"give every level the address where the {target['platform']} platform "
                              "places it (where the emulator or chip has that memory)")
        regions.append({"name": name, "origin": int(lvl["address"]), "length": int(lvl["size"]),
                        "writable": bool(lvl["writable"])})
    ordered = sorted(regions, key=lambda r: r["origin"])
    for a, b in zip(ordered, ordered[1:]):
        if a["origin"] + a["length"] > b["origin"]:
            raise ConfigError(path, f"memory.{a['name']} (0x{a['origin']:08x}, {a['length']} bytes) overlaps "
                              f"memory.{b['name']} (0x{b['origin']:08x})", "move or shrink one of them")
    reserved = {}
    for purpose in PURPOSES:
        holders = [name for name, lvl in levels.items() if purpose in lvl["reserved"]]
        if len(holders) > 1:
            raise ConfigError(path, f"memory: {' and '.join(holders)} both reserve `{purpose}` bytes",
                              "reserve them in one level")
        if not holders:
            if purpose in REQUIRED:
                raise ConfigError(path, f"memory: no level reserves `{purpose}` bytes",
                                  f"add e.g. `reserved: {{{purpose}: 8192}}` to the level that holds the "
                                  f"program's {purpose}")
            continue
        level = holders[0]
        if purpose != "code" and not levels[level]["writable"]:
            raise ConfigError(path, f"memory.{level}.reserved.{purpose}: {level} is read-only",
                              f"reserve {purpose} bytes in a writable level")
        reserved[purpose] = {"level": level, "bytes": int(levels[level]["reserved"][purpose])}
    areas = []
    for key in arch.get("areas", []):
        holders = [name for name, lvl in levels.items() if key in lvl["reserved"]]
        if len(holders) != 1:
            raise ConfigError(path, f"memory: {len(holders) or 'no'} levels reserve `{key}` bytes",
                              f"the {target['platform']} platform needs them in exactly one writable level")
        if not levels[holders[0]]["writable"]:
            raise ConfigError(path, f"memory.{holders[0]}.reserved.{key}: {holders[0]} is read-only",
                              f"reserve {key} bytes in a writable level")
        areas.append({"name": key, "level": holders[0], "bytes": int(levels[holders[0]]["reserved"][key])})
    tsr = []
    for role, name in sections(target["place"]).items():
        level = target["place"][role]
        noload = name.startswith(".bss.")
        if noload and not levels[level]["writable"]:
            raise ConfigError(path, f"place.{role}: {level} is read-only", f"place {role} in a writable level")
        if not any(s["name"] == name for s in tsr):
            tsr.append({"name": name, "level": level, "noload": noload})
    for name in arch.get("sections", []):
        level = name.rsplit(".", 1)[1]
        if level not in levels or not levels[level]["writable"]:
            raise ConfigError(path, f"memory.{level}: the {target['platform']} platform places {name} there",
                              "declare it as a writable level")
        if not any(s["name"] == name for s in tsr):
            tsr.append({"name": name, "level": level, "noload": name.startswith(".bss.")})
    out = {"target": target["name"], "regions": regions, "reserved": reserved, "tessera": tsr,
           "arch": {k: arch[k] for k in sorted(arch)}}
    if areas:
        out["areas"] = areas
    if arch.get("code_layout", {}).get("each") and members:
        out["members"] = {k: list(dict.fromkeys(v)) for k, v in sorted(members.items())}
    return out


def _first_lines(pat, each, members):
    """The .text lines of one `first` pattern: as it is, or with `each`
    one line per archive member, each at a multiple of `each` bytes (a
    member the link does not pull in adds no padding: the location is
    aligned already)."""
    if not each or pat not in members:
        return f"\n        {pat}(.text .text.*)"
    return "".join(f"\n        . = ALIGN({each});\n        {pat}{m}(.text .text.*)" for m in members[pat])


def script(v):
    """The linker script text of a view()."""
    from .cfmt import header_comment   # numpy: only the step writing a script needs it

    arch = v["arch"]
    res = v["reserved"]
    code = res["code"]["level"]
    data = res["data"]["level"]
    stack = res["stack"]["level"]
    heap = res.get("heap")
    at_code = "" if data == code else f" AT > {code}"
    out = [header_comment([f"tessera: memory map of target {v['target']}, from its YAML memory levels.",
                           "Each region has the level's size; reserved bytes hold the program."])]
    if arch.get("output_arch"):
        out.append(f"OUTPUT_ARCH({arch['output_arch']})")
    out.append(f"ENTRY({arch['entry']})\n")
    out.append("MEMORY\n{")
    for r in v["regions"]:
        attrs = "rwx" if r["writable"] else "rx"
        out.append(f"    {r['name']} ({attrs}) : ORIGIN = 0x{r['origin']:08x}, LENGTH = {r['length']}")
    out.append("}\n")
    out.append("/* bytes reserved for the program, by purpose (memory.<level>.reserved) */")
    for purpose in PURPOSES:
        size = res[purpose]["bytes"] if purpose in res else 0
        out.append(f"__tsr_{purpose}_reserved = {size};")
    out.append("")
    out.append("SECTIONS\n{")
    out.append(f"""    /* start-up first, at the origin of the code level */
    .init : {{
{chr(10).join(f"        KEEP(*({s}))" for s in arch["startup"])}
    }} > {code}
""")
    out.append("    /* tessera's data (sizes checked by the memory plan); before the catch-all\n"
               "       patterns below so that those never claim it */")
    for s in v["tessera"]:
        kind = " (NOLOAD)" if s["noload"] else ""
        out.append(f"    {s['name']}{kind} : ALIGN(8) {{ *({s['name']}) }} > {s['level']}")
    layout = arch.get("code_layout")
    first = last = ""
    text = "*(.text .text.* .gnu.linkonce.t.*)"
    if layout:
        first = "".join(_first_lines(pat, layout.get("each"), v.get("members", {})) for pat in layout["first"])
        skip = f"EXCLUDE_FILE({' '.join(layout['last'])}) "
        text = f"*({skip}.text {skip}.text.* {skip}.gnu.linkonce.t.*)"
        last = "\n        *(.text .text.* .gnu.linkonce.t.*)"
    out.append(f"""
    .text :{f" ALIGN({layout['align']})" if layout else ""} {{{first}
        *(.text.unlikely .text.unlikely.*)
        *(.text.startup .text.startup.*)
        {text}{last}
        KEEP(*(.fini .fini.*))
        __text_end = .;
        *(.rdata .rodata .rodata.* .gnu.linkonce.r.*)
        *(.srodata .srodata.*)
        *(.data.rel.ro .data.rel.ro.*)
        *(.got .got.*)
        . = ALIGN(8);
        PROVIDE_HIDDEN(__preinit_array_start = .);
        KEEP(*(.preinit_array))
        PROVIDE_HIDDEN(__preinit_array_end = .);
        PROVIDE_HIDDEN(__init_array_start = .);
        KEEP(*(SORT_BY_INIT_PRIORITY(.init_array.*) SORT_BY_INIT_PRIORITY(.ctors.*)))
        KEEP(*(.init_array .ctors))
        PROVIDE_HIDDEN(__init_array_end = .);
        PROVIDE_HIDDEN(__fini_array_start = .);
        KEEP(*(SORT_BY_INIT_PRIORITY(.fini_array.*) SORT_BY_INIT_PRIORITY(.dtors.*)))
        KEEP(*(.fini_array .dtors))
        PROVIDE_HIDDEN(__fini_array_end = .);
    }} > {code}

    /* initialized data: runs in the data level, loaded from the code level */
    .data : ALIGN_WITH_INPUT {{
        *(.data .data.* .gnu.linkonce.d.*)
        . = ALIGN(8);
        PROVIDE(__global_pointer$ = . + 0x800);
        *(.sdata .sdata.* .sdata2.* .gnu.linkonce.s.*)
    }} > {data}{at_code}
    PROVIDE(__data_start = ADDR(.data));
    PROVIDE(__data_source = LOADADDR(.data));
    .tdata : ALIGN_WITH_INPUT {{
        *(.tdata .tdata.* .gnu.linkonce.td.*)
        PROVIDE(__data_end = .);
        PROVIDE(__tdata_end = .);
    }} > {data}{at_code}
    PROVIDE(__tls_base = ADDR(.tdata));
    PROVIDE(__tdata_start = ADDR(.tdata));
    PROVIDE(__tdata_source = LOADADDR(.tdata));
    PROVIDE(__tdata_source_end = LOADADDR(.tdata) + SIZEOF(.tdata));
    PROVIDE(__data_source_end = __tdata_source_end);
    PROVIDE(__tdata_size = SIZEOF(.tdata));
    PROVIDE(__edata = __data_end);
    PROVIDE(_edata = __data_end);
    PROVIDE(edata = __data_end);
    PROVIDE(__data_size = __data_end - __data_start);
    PROVIDE(__data_source_size = __data_source_end - __data_source);
    .tbss (NOLOAD) : {{
        *(.tbss .tbss.* .gnu.linkonce.tb.*)
        *(.tcommon)
        PROVIDE(__tls_end = .);
        PROVIDE(__tbss_end = .);
    }} > {data}
    PROVIDE(__bss_start = ADDR(.tbss));
    PROVIDE(__tbss_start = ADDR(.tbss));
    PROVIDE(__tbss_offset = ADDR(.tbss) - ADDR(.tdata));
    PROVIDE(__tbss_size = SIZEOF(.tbss));
    PROVIDE(__tls_size = __tls_end - __tls_base);
    PROVIDE(__tls_align = MAX(ALIGNOF(.tdata), ALIGNOF(.tbss)));
    /* ld does not advance over .tbss; give it room */
    .tbss_space (NOLOAD) : {{
        . = ADDR(.tbss);
        . = . + SIZEOF(.tbss);
    }} > {data}
    .bss (NOLOAD) : {{
        *(.sbss* .gnu.linkonce.sb.*)
        *(.bss .bss.* .gnu.linkonce.b.*)
        *(COMMON)
        . = ALIGN(8);
        __bss_end = .;
    }} > {data}
    PROVIDE(__non_tls_bss_start = ADDR(.bss));
    PROVIDE(__end = __bss_end);
    PROVIDE(_end = __bss_end);
    PROVIDE(end = __bss_end);
    PROVIDE(__bss_size = __bss_end - __bss_start);
""")
    heap_level = heap["level"] if heap else data
    out.append(f"""    .heap (NOLOAD) : ALIGN(8) {{
        PROVIDE(__heap_start = .);
        . += __tsr_heap_reserved;
        PROVIDE(__heap_end = .);
    }} > {heap_level}
    PROVIDE(__heap_size = __heap_end - __heap_start);
    .stack (NOLOAD) : ALIGN(8) {{
        . += __tsr_stack_reserved;
    }} > {stack}
    PROVIDE(__stack = ADDR(.stack) + SIZEOF(.stack));
""")
    for a in v.get("areas", []):
        n, size = a["name"], a["bytes"]
        out.append(f"""    .tsr_{n} (NOLOAD) : ALIGN(16) {{
        __tsr_{n}_start = .;
        *(.tsr_{n}.*)
        __tsr_{n}_vars_end = .;
        . += MAX(0, {size} - (__tsr_{n}_vars_end - __tsr_{n}_start));
        __tsr_{n}_end = .;
    }} > {a['level']}
    ASSERT(__tsr_{n}_vars_end - __tsr_{n}_start <= {size},
           "tessera-linker: {a['level']}: the program's {n} variables exceed memory.{a['level']}.reserved.{n}")
""")
    for name, expr in sorted(arch.get("symbols", {}).items()):
        out.append(f"    PROVIDE({name} = {expr});")
    out.append("")
    data_sections = "SIZEOF(.data) + SIZEOF(.tdata) + SIZEOF(.tbss) + SIZEOF(.bss)"
    # the load image of .data takes code-level bytes only when it is copied
    # from there to another level at start-up
    code_sections = "SIZEOF(.init) + SIZEOF(.text)" + ("" if data == code else
                                                       " + SIZEOF(.data) + SIZEOF(.tdata)")
    checks = [("code", code_sections, "code and constants"),
              ("data", data_sections, "the C runtime's data and bss")]
    for purpose, expr, what in checks:
        level = res[purpose]["level"]
        out.append(f"    ASSERT({expr} <= __tsr_{purpose}_reserved,\n"
                   f"           \"tessera-linker: {level}: {what} exceed the {res[purpose]['bytes']} bytes of "
                   f"memory.{level}.reserved.{purpose}\")")
    out.append("""
    /DISCARD/ : {
        *(.note .note.*)
        *(.eh_frame .eh_frame.*)""")
    for pattern in arch.get("discard", []):
        out.append(f"        *({pattern})")
    out.append("    }")
    out.append("""
    .comment 0 : { *(.comment) }
    .debug_info 0 : { *(.debug_info .gnu.linkonce.wi.*) }
    .debug_abbrev 0 : { *(.debug_abbrev) }
    .debug_line 0 : { *(.debug_line .debug_line.* .debug_line_end) }
    .debug_frame 0 : { *(.debug_frame) }
    .debug_str 0 : { *(.debug_str) }
    .debug_aranges 0 : { *(.debug_aranges) }
    .debug_rnglists 0 : { *(.debug_rnglists) }
    .debug_loclists 0 : { *(.debug_loclists) }
    .debug_line_str 0 : { *(.debug_line_str) }
    .gnu.attributes 0 : { KEEP(*(.gnu.attributes)) }
}

ASSERT(__data_size == __data_source_size, "tessera-linker: .data/.tdata load image and RAM copy differ in size")""")
    return "\n".join(out) + "\n"


def link_error(stderr, target_path):
    """One line for a failed link: the first `tessera-linker:` message or
    region overflow ld printed, with what to change; None when ld failed
    for another reason."""
    import re

    for line in stderr.splitlines():
        if "tessera-linker:" in line:
            what = line.split("tessera-linker:", 1)[1].strip()
            return f"{target_path}: {what} (raise that reservation, or make the program smaller)"
    for line in stderr.splitlines():
        m = re.search(r"region `([^']+)' overflowed by (\d+) bytes", line)
        if m:
            return (f"{target_path}: memory.{m.group(1)}: the linked program overflows the level by "
                    f"{m.group(2)} bytes (raise its size or reservations in the target YAML)")
    return None


# ---- what the program needs, from its object files, before linking ----------

def _elf_sections(data):
    """(name, flags, type, size) of every section of an ELF object's bytes."""
    import struct

    if data[:4] != b"\x7fELF":
        return []
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        fmt = end + "IIQQQQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        fmt = end + "IIIIII"
    headers = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
    # name, type, flags, addr, offset, size
    strtab = headers[shstrndx][4]
    out = []
    for name, kind, flags, _addr, _off, size in headers:
        label = data[strtab + name:data.index(b"\0", strtab + name)].decode()
        out.append((label, flags, kind, size))
    return out


SHF_WRITE, SHF_ALLOC, SHT_NOBITS = 0x1, 0x2, 8


def program_sizes(paths):
    """Bytes the given object files bring, tessera's own sections left out
    (the memory plan counts those): {"code": read-only bytes, "data": .data
    bytes, "bss": .bss bytes, "by_file": {path: code + data bytes}}."""
    import os

    total = {"code": 0, "data": 0, "bss": 0, "by_file": {}}
    for path in paths:
        with open(path, "rb") as f:
            sections = _elf_sections(f.read())
        mine = 0
        for name, flags, kind, size in sections:
            if not flags & SHF_ALLOC or ".tsr." in name:
                continue
            if kind == SHT_NOBITS:
                total["bss"] += size
            elif flags & SHF_WRITE:
                total["data"] += size
                mine += size
            else:
                total["code"] += size
                mine += size
        total["by_file"][os.path.basename(path)] = mine
    return total


def check_program(v, sizes, target_path):
    """FitError when the objects alone already exceed a reservation (the
    C library and alignment only add to them; the linker's ASSERTs check
    the final program)."""
    from ..errors import FitError

    res = v["reserved"]
    separate = res["data"]["level"] != res["code"]["level"]
    needs = {"code": sizes["code"] + (sizes["data"] if separate else 0),
             "data": sizes["data"] + sizes["bss"]}
    for purpose in ("code", "data"):
        have = res[purpose]["bytes"]
        if needs[purpose] > have:
            level = res[purpose]["level"]
            big = sorted(sizes["by_file"].items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            largest = ", ".join(f"{name} {n}" for name, n in big)
            raise FitError(f"{target_path}: memory.{level}.reserved.{purpose}",
                           f"the program needs at least {needs[purpose]} bytes of {purpose} but {have} "
                           f"are reserved (largest objects: {largest})",
                           f"raise memory.{level}.reserved.{purpose} if {level} has room, or use a "
                           "smaller model")


def relative_map(path):
    """Rewrite the link map at `path` with the build folder's own prefix
    removed (GNU ld writes the paths it was given, and SCons gives absolute
    ones outside the checkout): the same build in another `out=` folder
    gives the same map, byte for byte."""
    import os

    prefix = os.path.dirname(os.path.abspath(path)) + os.sep
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text.replace(prefix, ""))
