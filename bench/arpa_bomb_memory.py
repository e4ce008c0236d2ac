"""Peak memory of NgramLM refusing a gzip decompression bomb given as an ARPA file.

The bomb (issue 27 item 1): 1.5 GB of NUL bytes, gzipped (about 1.5 MB on disk), loaded with
the default ``max_decompressed_bytes`` (16 GiB, so the limit does not stop it: the line-length
bound of the streamed ARPA reader must). Each load runs in a fresh child process whose peak
resident set (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``, read in a parent that started
only that child) is reported beside a reference child that imports draftlattice and loads a tiny
valid ARPA file, measured in the same run; the median of --repeats runs each.

Usage: python bench/arpa_bomb_memory.py [--gigabytes 1.5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Loads argv[1] in a grandchild and prints its peak RSS (MiB), the outcome and the seconds.
MEASURE = r"""
import json, resource, subprocess, sys, time
child = r'''
import sys
import draftlattice
try:
    draftlattice.NgramLM(sys.argv[1])
    print("loaded")
except Exception as error:
    print(type(error).__name__ + ": " + str(error)[:300])
'''
start = time.perf_counter()
out = subprocess.run([sys.executable, "-c", child, sys.argv[1]], capture_output=True, text=True)
seconds = time.perf_counter() - start
peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"peak_mib": peak_mib, "outcome": (out.stdout + out.stderr).strip()[-300:], "seconds": seconds}))
"""

TINY_ARPA = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\n-0.5\ta\n-0.5\t</s>\n\n\\end\\\n"


def write_nul_gzip(path: Path, total: int) -> None:
    """`total` NUL bytes, gzip-compressed, written block by block."""
    block = bytes(1 << 24)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
    with open(path, "wb") as out:
        left = total
        while left > 0:
            out.write(packer.compress(block[: min(left, len(block))]))
            left -= len(block)
        out.write(packer.flush())


def measure(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=1.5, help="decompressed size of the bomb (10^9 bytes)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bomb = Path(tmp) / "bomb.arpa.gz"
        write_nul_gzip(bomb, int(args.gigabytes * 1e9))
        tiny = Path(tmp) / "tiny.arpa"
        tiny.write_text(TINY_ARPA)
        runs = {
            name: [measure(path) for _ in range(args.repeats)] for name, path in (("reference", tiny), ("bomb", bomb))
        }
        result = {
            "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip(),
            "bomb_bytes_on_disk": bomb.stat().st_size,
            "bomb_bytes_decompressed": int(args.gigabytes * 1e9),
        }
    for name, rows in runs.items():
        result[name] = {
            "peak_mib_median": statistics.median(r["peak_mib"] for r in rows),
            "seconds_median": statistics.median(r["seconds"] for r in rows),
            "outcome": rows[0]["outcome"],
        }
    result["bomb_minus_reference_mib"] = result["bomb"]["peak_mib_median"] - result["reference"]["peak_mib_median"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
