"""The patched steps of a report (schedule.json's kind "patch",
fusion/patch.py): each step's chain, tile, halo policy and tile-level
bytes, why it was chosen and what it beat, for the console and
report.html."""

from html import escape


def _what(g):
    p = g["patch"]
    h, w = p["tile"]
    n = p["patches"]
    return (f"{g['form']}, {len(g['layers'])} layers, {n} patch{'es' if n != 1 else ''} of {h}x{w} output pixels, "
            f"halos "
            f"{'recomputed' if p['policy'] == 'recompute' else 'cached'}, {p['l1_bytes']['total']} B of the tile "
            f"level")


def _alternative(a):
    if "tile" not in a:
        return f"{a['layers']}: {a['why']}"
    return f"{a['layers']} {a['tile'][0]}x{a['tile'][1]} {a['policy']}: {a['why']}"


def lines(fusion):
    """Console lines: the need, then per patched step what it is, its
    reason and its alternatives."""
    info = fusion.get("patched")
    groups = [g for g in fusion.get("groups", []) if "patch" in g]
    if not info or not groups:
        return []
    out = [f"patched steps (need {info['need']} B of activations; {info['source']}):"]
    for g in groups:
        out.append(f"  {g['step']}: {_what(g)}")
        out.append(f"    {g['reason']}")
        out += [f"    instead of {_alternative(a)}" for a in g.get("alternatives", [])]
    return out


def html(fusion):
    """report.html's section (empty without patched steps)."""
    info = fusion.get("patched")
    groups = [g for g in fusion.get("groups", []) if "patch" in g]
    if not info or not groups:
        return ""
    out = [f'<h2>Patched steps</h2><p class="note">need: {info["need"]} B of activations '
           f"({escape(info['source'])}); {info.get('chains_priced', 0)} chains priced</p>"]
    for g in groups:
        out.append(f'<h3 class="level">{escape(g["step"])}</h3><p>{escape(_what(g))}<br>{escape(g["reason"])}</p>')
        alts = g.get("alternatives", [])
        if alts:
            out.append('<table><tr><th class="l">instead of</th><th>tile</th><th>halo</th><th>tile level B</th>'
                       '<th>cost</th><th class="l">why not</th></tr>')
            for a in alts:
                tile = f"{a['tile'][0]}x{a['tile'][1]}" if "tile" in a else ""
                out.append(f'<tr><td class="l">{escape(a["layers"])}</td><td>{tile}</td>'
                           f"<td>{escape(a.get('policy', ''))}</td><td>{a.get('l1_bytes', '')}</td>"
                           f"<td>{a.get('cost', '')}</td><td class=\"l\">{escape(a['why'])}</td></tr>")
            out.append("</table>")
    return "".join(out)
