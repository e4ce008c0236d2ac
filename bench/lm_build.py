"""Wall time and peak memory of building a Katz 4-gram LM, beside references from the same run.

For each corpus (WikiText-2 train, cleaned as the paper's recipe; the 66 MB English Wikipedia
sample with its <doc ...>/</doc> lines dropped), in a fresh subprocess per run:
  * draftlattice build_lm (whitespace words, 4-gram Katz, no pruning, ARPA output): wall time per
    phase (count / estimate / write) and peak RSS of the process;
  * reference 1: kenlm.Model loading the ARPA we wrote (probing), time and peak RSS;
  * reference 2: a pure-Python counting baseline (dict of word tuples, 1..4-grams) on the
    same corpus, or on its first --python-lines lines for the large one, beside our counting of
    exactly that slice.
Median of --repeats runs (peak RSS: the maximum). Corpus preparation is not timed.
Usage: python bench/lm_build.py [--repeats 3] [--enwiki-repeats 1] [--json out.json]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from draftlattice.assets import data_dir  # noqa: E402

CHILD = r"""
import json, resource, sys, time
kind, corpus, out = sys.argv[1], sys.argv[2], sys.argv[3]
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result = {}
if kind == "build":
    from draftlattice.ngram.build import build_lm
    start = time.perf_counter()
    r = build_lm(corpus, 4, out_path=out, overwrite=True)
    result = {"seconds": time.perf_counter() - start, "phases": r.seconds, "counts": r.counts,
              "tokens": r.tokens}
elif kind == "kenlm":
    import kenlm
    start = time.perf_counter()
    kenlm.Model(out)
    result = {"seconds": time.perf_counter() - start}
elif kind == "python_count":
    start = time.perf_counter()
    tables = [dict() for _ in range(4)]
    tables[0][(b"<s>",)] = 0
    with open(corpus, "rb") as f:
        for line in f:
            words = line.split()  # ASCII whitespace, as ours
            if not words:
                continue
            tables[0][(b"<s>",)] += 1
            seq = [b"<s>"] + words + [b"</s>"]
            for i in range(1, len(seq)):
                for n in range(1, 5):
                    if i - n + 1 < 0:
                        break
                    key = tuple(seq[i - n + 1:i + 1])
                    table = tables[n - 1]
                    table[key] = table.get(key, 0) + 1
    result = {"seconds": time.perf_counter() - start, "counts": [len(t) for t in tables]}
elif kind == "our_count":
    from draftlattice import _core
    start = time.perf_counter()
    c = _core.NgramCounter(4)
    with open(corpus, "rb") as f:
        while True:
            lines = f.readlines(8 << 20)
            if not lines:
                break
            c.add_text(b"".join(lines))
    result = {"seconds": time.perf_counter() - start, "counts": [c.num_ngrams(k) for k in range(1, 5)]}
result["peak_rss_mb"] = peak_mb()
print(json.dumps(result))
"""


def run_child(kind: str, corpus: Path, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(corpus), str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_runs(kind: str, corpus: Path, out: Path, repeats: int) -> dict:
    runs = [run_child(kind, corpus, out) for _ in range(repeats)]
    result = dict(runs[0])
    result["seconds"] = statistics.median(r["seconds"] for r in runs)
    result["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    if "phases" in result:
        result["phases"] = {k: statistics.median(r["phases"][k] for r in runs) for k in result["phases"]}
    result["runs"] = repeats
    return result


def prepare(tmp: Path) -> dict[str, Path]:
    wt = tmp / "wikitext2.train.txt"
    with open(data_dir() / "wikitext-2" / "train.txt", encoding="utf-8") as src, open(wt, "w", encoding="utf-8") as dst:
        for line in src:
            line = line.strip(" \n")
            if line:
                dst.write(line + "\n")
    enwiki = tmp / "enwiki.txt"
    with (
        lzma.open(data_dir() / "enwiki-sample" / "enwiki-sample.txt.xz", "rt", encoding="utf-8") as src,
        open(enwiki, "w", encoding="utf-8") as dst,
    ):
        for line in src:
            if line.startswith("<doc ") or line.startswith("</doc>"):
                continue
            line = line.strip()
            if line:
                dst.write(line + "\n")
    return {"wikitext2": wt, "enwiki": enwiki}


def head(path: Path, lines: int, out: Path) -> Path:
    with open(path, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i >= lines:
                break
            dst.write(line)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--enwiki-repeats", type=int, default=1)
    parser.add_argument("--python-lines", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    report: dict = {"machine": machine, "corpora": {}}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        corpora = prepare(tmp)
        for name, corpus in corpora.items():
            repeats = args.repeats if name == "wikitext2" else args.enwiki_repeats
            out = tmp / f"{name}.katz4.arpa"
            entry = {"corpus_mb": corpus.stat().st_size / 2**20}
            entry["build"] = median_runs("build", corpus, out, repeats)
            entry["arpa_mb"] = out.stat().st_size / 2**20
            entry["kenlm_load"] = median_runs("kenlm", corpus, out, repeats)
            sliced = corpus if name == "wikitext2" else head(corpus, args.python_lines, tmp / f"{name}.head.txt")
            entry["slice_mb"] = sliced.stat().st_size / 2**20
            entry["python_count"] = median_runs("python_count", sliced, out, 1)
            entry["our_count"] = median_runs("our_count", sliced, out, repeats)
            assert entry["python_count"]["counts"] == entry["our_count"]["counts"], "count mismatch"
            report["corpora"][name] = entry
            b = entry["build"]
            print(
                f"{name}: {entry['corpus_mb']:.1f} MB, {b['tokens']:,} tokens, n-grams {b['counts']}\n"
                f"  build_lm 4-gram: {b['seconds']:.1f} s (count {b['phases']['count']:.1f}, "
                f"estimate {b['phases']['estimate']:.1f}, write {b['phases']['write']:.1f}), "
                f"peak RSS {b['peak_rss_mb']:.0f} MB, ARPA {entry['arpa_mb']:.0f} MB\n"
                f"  kenlm.Model load of that ARPA: {entry['kenlm_load']['seconds']:.1f} s, "
                f"peak RSS {entry['kenlm_load']['peak_rss_mb']:.0f} MB\n"
                f"  counting {entry['slice_mb']:.1f} MB: ours {entry['our_count']['seconds']:.2f} s "
                f"({entry['our_count']['peak_rss_mb']:.0f} MB) vs pure Python "
                f"{entry['python_count']['seconds']:.2f} s ({entry['python_count']['peak_rss_mb']:.0f} MB): "
                f"{entry['python_count']['seconds'] / entry['our_count']['seconds']:.1f}x",
                flush=True,
            )
    print(f"machine: {machine}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
