"""`tessera diff` (tessera.report.diff) on two real builds that differ in
L1 size: the layer whose tiling the smaller L1 changes shows its new tile,
tile count, L1 bytes and DMA bytes; the others show no change; the HTML
diff marks it."""

import json
import os
import subprocess
import sys

import yaml

from helpers import ROOT, one_error, scons


def tessera(*args):
    """The `tessera` command, run from the checkout."""
    return subprocess.run([sys.executable, "-m", "tessera", *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "site_scons")))


def test_l1_change_shows_in_the_diff(tmp_path):
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        data = yaml.safe_load(f)
    builds = []
    for l1 in (64000, 4000):
        data["memory"]["L1"]["size"] = l1
        (tmp_path / f"t{l1}").mkdir()
        target = tmp_path / f"t{l1}" / "myhost.yaml"
        target.write_text(yaml.safe_dump(data))
        out = tmp_path / f"out{l1}"
        scons(f"target={target}", "model=tiny", out=out, check=True)
        builds.append(os.path.join(out, "myhost", "tiny"))
    a, b = (json.load(open(os.path.join(d, "report.json"))) for d in builds)
    changed = [x["name"] for x, y in zip(a["layers"], b["layers"]) if (x["tile"], x["tiled"]) != (y["tile"], y["tiled"])]
    assert changed   # 4000 B of L1 forces at least one layer into tiles
    html = tmp_path / "diff.html"
    res = tessera("diff", builds[0], builds[1], "--html", html)
    assert res.returncode == 0, res.stderr
    lines = {line.split("│")[1].strip(): line for line in res.stdout.splitlines() if line.count("│") > 3}
    for x, y in zip(a["layers"], b["layers"]):
        row = lines[x["name"]]
        if x["name"] in changed:
            assert f"{x['n_tiles']:,} -> {y['n_tiles']:,}" in row
            assert f"{x['l1_bytes']:,} -> {y['l1_bytes']:,}" in row
            assert f"{y['tile']['h']}x{y['tile']['w']}x{y['tile']['c']}" in row
        elif all(x.get(k) == y.get(k) for k in ("n_tiles", "l1_bytes", "dma_bytes")):
            assert "->" not in row
    peak = (a["memory"]["L1"]["peak"], b["memory"]["L1"]["peak"])
    assert f"L1 peak: {peak[0]:,} -> {peak[1]:,}" in res.stdout
    text = html.read_text()
    differ = [x["name"] for x, y in zip(a["layers"], b["layers"])
              if any(x.get(k) != y.get(k) for k in ("tiled", "tile", "n_tiles", "l1_bytes", "dma_bytes"))]
    assert text.count('<tr class="changed">') == len(differ)


def test_a_missing_report_is_one_line(tmp_path):
    res = tessera("diff", tmp_path, tmp_path)
    assert res.returncode == 2
    assert "report.json" in one_error(res)
