"""Load time, memory and scoring throughput of NgramLM beside kenlm, on the same ARPA model.

Measures, for ../shared/data/lm/wt2_kn4.arpa.xz (decompressed once to a temp dir):
  * ARPA load time: draftlattice.NgramLM vs kenlm.Model (probing, its default), same file;
  * binary load time: NgramLM on the .dlm written by NgramLM.save (mmap + checksum);
  * the checksum alone over the .dlm bytes;
  * resident memory per n-gram: RSS after load minus RSS before, / total n-grams;
  * scoring throughput (tokens/s) over WikiText-2 test sentences: NgramLM.token_scores vs
    kenlm.Model.full_scores, one call per sentence (both from Python).
Each load runs in a fresh subprocess (median of --repeats); warm page cache (a first untimed
read). Usage: python bench/lm_load.py [--model PATH.arpa.xz] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from draftlattice.assets import data_dir  # noqa: E402

CHILD = r"""
import json, sys, time
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
kind, path = sys.argv[1], sys.argv[2]
import draftlattice, kenlm, numpy
before = rss_kb()
start = time.perf_counter()
if kind == "kenlm":
    model = kenlm.Model(path)
    counts = None
else:
    model = draftlattice.NgramLM(path)
    counts = list(model.counts)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_delta_kb": rss_kb() - before, "counts": counts}))
"""


def child(kind: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(path)], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_run(kind: str, path: Path, repeats: int) -> dict:
    runs = [child(kind, path) for _ in range(repeats)]
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "rss_delta_kb": statistics.median(r["rss_delta_kb"] for r in runs),
        "counts": runs[0]["counts"],
    }


def throughput(arpa: Path, binary: Path, data: Path) -> dict:
    import kenlm

    from draftlattice import NgramLM

    plain = NgramLM(binary)
    words = plain.words()
    lm = plain.with_vocab(words + ["<never-seen>"])
    index = {w: i for i, w in enumerate(words)}
    unknown = len(words)
    model = kenlm.Model(str(arpa))
    lines = [row.split() for row in (data / "wikitext-2" / "test.txt").read_text(encoding="utf-8").splitlines()]
    lines = [row for row in lines if row]
    ids = [[index.get(w, unknown) for w in row] for row in lines]
    texts = [" ".join(row) for row in lines]
    tokens = sum(len(row) + 1 for row in lines)
    result = {"sentences": len(lines), "tokens": tokens}
    for name, fn in (
        ("ours", lambda: [lm.token_scores(s, bos=True, eos=True) for s in ids]),
        ("kenlm", lambda: [list(model.full_scores(t, bos=True, eos=True)) for t in texts]),
    ):
        fn()  # warm-up
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        result[f"{name}_tokens_per_s"] = tokens / statistics.median(times)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=data_dir() / "lm" / "wt2_kn4.arpa.xz")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import draftlattice._core as core
    from draftlattice import NgramLM

    with tempfile.TemporaryDirectory() as tmp:
        arpa = Path(tmp) / "model.arpa"
        with lzma.open(args.model) as src, open(arpa, "wb") as dst:
            while chunk := src.read(1 << 24):
                dst.write(chunk)
        binary = Path(tmp) / "model.dlm"
        NgramLM(arpa).save(binary)
        arpa.read_bytes(), binary.read_bytes()  # warm the page cache
        ours_arpa = median_run("ours", arpa, args.repeats)
        ours_binary = median_run("ours", binary, args.repeats)
        kenlm_arpa = median_run("kenlm", arpa, args.repeats)
        blob = binary.read_bytes()
        sums = []
        for _ in range(5):
            start = time.perf_counter()
            core.binary_checksum(blob)
            sums.append(time.perf_counter() - start)
        total = sum(ours_arpa["counts"])
        report = {
            "machine": f"{platform.machine()} {os.cpu_count()} cpus, load avg {os.getloadavg()[0]:.1f}",
            "model": str(args.model.name),
            "counts": ours_arpa["counts"],
            "arpa_bytes": arpa.stat().st_size,
            "binary_bytes": binary.stat().st_size,
            "ours_arpa_load_s": ours_arpa["seconds"],
            "kenlm_arpa_load_s": kenlm_arpa["seconds"],
            "ours_binary_load_s": ours_binary["seconds"],
            "checksum_s": statistics.median(sums),
            "ours_arpa_bytes_per_ngram": ours_arpa["rss_delta_kb"] * 1024 / total,
            "ours_binary_bytes_per_ngram": ours_binary["rss_delta_kb"] * 1024 / total,
            "kenlm_arpa_bytes_per_ngram": kenlm_arpa["rss_delta_kb"] * 1024 / total,
        }
        report.update(throughput(arpa, binary, data_dir()))
    print(json.dumps(report, indent=1))
    print(
        f"\nARPA load: ours {report['ours_arpa_load_s']:.2f} s, kenlm {report['kenlm_arpa_load_s']:.2f} s "
        f"(ratio {report['kenlm_arpa_load_s'] / report['ours_arpa_load_s']:.2f}x)\n"
        f"binary load: {report['ours_binary_load_s'] * 1000:.1f} ms "
        f"(checksum {report['checksum_s'] * 1000:.1f} ms of {report['binary_bytes'] / 1e6:.0f} MB)\n"
        f"RSS per n-gram: ours {report['ours_arpa_bytes_per_ngram']:.1f} B (ARPA), "
        f"{report['ours_binary_bytes_per_ngram']:.1f} B (binary, mapped), kenlm {report['kenlm_arpa_bytes_per_ngram']:.1f} B\n"
        f"scoring: ours {report['ours_tokens_per_s'] / 1e6:.2f} M tokens/s, kenlm "
        f"{report['kenlm_tokens_per_s'] / 1e6:.2f} M tokens/s"
    )


if __name__ == "__main__":
    main()
