#!/usr/bin/env python3
"""Copy the four MLPerf Tiny reference int8 .tflite models out of a
mlcommons/tiny git repository into examples/mlperf_tiny/data/.

    tools/mlperf_tiny.py /path/to/mlcommons/tiny    # a clone (or a bare mirror)

The files are taken with `git show <commit>:<path>` at the commit below and
checked against their SHA-256, so the examples and tests always run on the
published bytes (Apache-2.0, see examples/mlperf_tiny/README.md). The
repository does not carry them.
"""

import hashlib
import os
import subprocess
import sys

COMMIT = "1afd2c9820f795965a6134facd0b4dfae41ef23f"
BASE = "benchmark/training"
FILES = {
    "kws_ref_model.tflite": (f"{BASE}/keyword_spotting/trained_models/kws_ref_model.tflite",
                             "aeea436800704fce17b17292e4412630ad856e9d777c044c64ef748a880bd0ae"),
    "vww_96_int8.tflite": (f"{BASE}/visual_wake_words/trained_models/vww_96_int8.tflite",
                           "597a384c8c2c8a1276f04702f25013b7838f2f814f1ca7c174d295b73e3d6b7b"),
    "pretrainedResnet_quant.tflite": (f"{BASE}/image_classification/trained_models/pretrainedResnet_quant.tflite",
                                      "3c002613d1b2475eb51dd78dfb85a546c8ae658dee71cf6ade43b022fe205415"),
    "ad01_int8.tflite": (f"{BASE}/anomaly_detection/trained_models/ad01_int8.tflite",
                         "87cf24194ef93d1d9b11a591d805526b98008e351655d29883c825c9c106ba24"),
}
DEST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "mlperf_tiny", "data")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    repo = argv[1]
    os.makedirs(DEST, exist_ok=True)
    for name, (path, digest) in sorted(FILES.items()):
        res = subprocess.run(["git", "-C", repo, "show", f"{COMMIT}:{path}"], capture_output=True)
        if res.returncode != 0:
            why = (res.stderr.decode(errors="replace").strip().splitlines() or ["git failed"])[-1]
            print(f"mlperf_tiny: error: {repo}: no {path} at {COMMIT[:12]} ({why}; "
                  "give a clone of https://github.com/mlcommons/tiny)", file=sys.stderr)
            return 1
        got = hashlib.sha256(res.stdout).hexdigest()
        if got != digest:
            print(f"mlperf_tiny: error: {path}: SHA-256 {got}, expected {digest}", file=sys.stderr)
            return 1
        with open(os.path.join(DEST, name), "wb") as f:
            f.write(res.stdout)
        print(f"{name}: {len(res.stdout)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
