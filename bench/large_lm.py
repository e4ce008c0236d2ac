"""Large n-gram LMs: build time and peak memory, .dlm load, memory per n-gram, rescoring latency.

Models (whitespace words, Katz, built into --work, never into lm_models/):
  wt2-1M    WikiText-2 train, 4-gram, relative-entropy pruned to 1,000,000 n-grams
  wt2       WikiText-2 train, 4-gram, unpruned (3.8 M n-grams)
  big       the English Wikipedia sample (<doc> lines dropped) + WikiText-2 train, 4-gram (21 M):
            the largest 4-gram the shared data gives
  big-6     the same corpus, order 6 (41 M n-grams), the highest order the kenlm module loads
  big-7     the same corpus, order 7, to pass 50 M n-grams for the load / memory / latency curve

Each build runs in a fresh subprocess; wall time and the peak resident memory of its whole
process tree (sampled every 0.2 s from /proc, so the Spark JVM and Python workers count) are
recorded. Builds: the one-machine trainer for every model; the Spark engine (local[2]) for the
models named in --spark (its output is compared byte for byte with the one-machine file).
Then, per model: .dlm load time and resident memory per n-gram (fresh subprocess, median of
--repeats) beside kenlm.Model on the same ARPA (probing, in-memory: the structure of kenlm's
probing binary), and rescoring latency at h=8, k=16 (p=1 and p=16; lattices of unigram-frequency
draws, random scores; median over --lattices).

With --lmplz (KenLM's tools, built by bench/tools/build_kenlm_tools.sh into bench/.cache), for the
unpruned models: lmplz's build time and peak memory on the same corpus and order (its memory is
the stated --lmplz-memory, its -S; lmplz estimates interpolated modified Kneser-Ney, not Katz, so
this compares the cost of building, not the models), and build_binary's probing and trie files
of our Katz ARPA: build time and bytes per n-gram beside the .dlm, and their resident memory on
load through the kenlm module (orders <= 6).

    bench/tools/build_kenlm_tools.sh
    PYTHONPATH=python python bench/large_lm.py --work /tmp/large_lm [--spark wt2] [--lmplz] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
if not SHARED.exists():
    SHARED = Path("/work/shared/data")

MODELS = {
    "wt2-1M": {"corpus": "wt2", "order": 4, "prune_to": 1_000_000},
    "wt2": {"corpus": "wt2", "order": 4},
    "big": {"corpus": "big", "order": 4},
    "big-6": {"corpus": "big", "order": 6},
    "big-7": {"corpus": "big", "order": 7},
}
KENLM_MAX_ORDER = 6  # the kenlm Python module on PyPI is compiled with KENLM_MAX_ORDER=6

BUILD_CHILD = r"""
import json, sys, time
engine, corpus, out, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
start = time.perf_counter()
if engine == "spark":
    from draftlattice.spark import build_lm
    settings = json.loads(sys.argv[5])
    options.update(master="local[2]", partitions=settings["partitions"], spark_conf=settings["conf"])
else:
    from draftlattice.ngram.build import build_lm
result = build_lm(corpus, out_path=out, overwrite=True, **options)
print(json.dumps({"seconds": time.perf_counter() - start, "phases": result.seconds, "counts": result.counts}))
"""

LOAD_CHILD = r"""
import json, sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
kind, path = sys.argv[1], sys.argv[2]
if kind == "dlm":
    from draftlattice.ngram import NgramLM
    before = rss(); start = time.perf_counter(); lm = NgramLM(path)
else:
    import kenlm
    before = rss(); start = time.perf_counter(); lm = kenlm.Model(path)  # ARPA or build_binary output
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_bytes": rss() - before}))
"""


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(args: list[str], command: list[str] | None = None, stdin=None, stdout=None) -> tuple[dict, float]:
    """Runs a child Python (or ``command``); returns its last JSON line ({} for a command) and the
    peak RSS in MiB of its process tree."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = command if command is not None else [sys.executable, "-c", *args]
    process = subprocess.Popen(
        argv, stdin=stdin, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peak = [0]

    def sample() -> None:
        while process.poll() is None:
            peak[0] = max(peak[0], tree_rss(process.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"child failed ({process.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1]) if command is None else {}
    return result, peak[0] / 2**20


def kenlm_tools(models: dict, name: str, corpus: str, arpa: Path, n: int, args) -> dict:
    """lmplz on the corpus (cost only: modified Kneser-Ney), build_binary probing / trie of our ARPA."""
    tools = args.lmplz_bin
    row: dict = {"lmplz_memory": args.lmplz_memory}
    out = args.work / f"{name}.lmplz.arpa"
    temp = args.work / "lmplz-tmp"
    temp.mkdir(exist_ok=True)
    start = time.perf_counter()
    # WikiText has "<unk>" tokens, which lmplz refuses in a corpus: --skip_symbols reads them as
    # whitespace (a few more distinct n-grams for us than for lmplz; this compares cost).
    with open(corpus, "rb") as text, open(out, "wb") as sink:
        _, peak = run_measured(
            [],
            [
                str(tools / "lmplz"),
                "-o",
                str(models[name]["order"]),
                "-S",
                args.lmplz_memory,
                "-T",
                str(temp),
                "--skip_symbols",
            ],
            stdin=text,
            stdout=sink,
        )
    row["lmplz"] = {"seconds": time.perf_counter() - start, "peak_mb": peak, "ngrams": arpa_ngrams(out)}
    out.unlink()
    for kind in ("probing", "trie"):
        binary = args.work / f"{name}.{kind}"
        start = time.perf_counter()
        _, peak = run_measured(
            [], [str(tools / "build_binary"), "-S", args.lmplz_memory, "-T", str(temp), kind, str(arpa), str(binary)]
        )
        built = {
            "seconds": time.perf_counter() - start,
            "peak_mb": peak,
            "file_bytes_per_ngram": binary.stat().st_size / n,
        }
        if models[name]["order"] <= KENLM_MAX_ORDER:
            loads = [run_measured([LOAD_CHILD, "kenlm", str(binary)])[0] for _ in range(args.repeats)]
            built["load_s"] = statistics.median(x["seconds"] for x in loads)
            built["rss_bytes_per_ngram"] = statistics.median(x["rss_bytes"] for x in loads) / n
        row[f"build_binary_{kind}"] = built
        binary.unlink()
    return row


def arpa_ngrams(path: Path) -> int:
    """Sum of the ARPA header's n-gram counts."""
    total = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("ngram "):
                total += int(line.split("=")[1])
            elif line.startswith("\\1-grams"):
                return total
    return total


def prepare(work: Path) -> dict[str, Path]:
    wt2 = work / "wt2.txt"
    big = work / "big.txt"
    if not wt2.exists():
        shutil.copy(SHARED / "wikitext-2" / "train.txt", wt2)
    if not big.exists():
        with (
            lzma.open(SHARED / "enwiki-sample" / "enwiki-sample.txt.xz", "rt", encoding="utf-8") as src,
            open(big, "w", encoding="utf-8") as dst,
        ):
            for line in src:
                if not line.startswith(("<doc ", "</doc>")):
                    dst.write(line)
            dst.write(wt2.read_text(encoding="utf-8"))
    return {"wt2": wt2, "big": big}


def files_equal(a: Path, b: Path) -> bool:
    """Byte equality, read in chunks (the ARPAs are GBs)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while chunk := fa.read(1 << 24):
            if chunk != fb.read(1 << 24):
                return False
    return True


def latency(dlm: Path, lattices: int) -> dict:
    """Median ms per rescore of 8x16 lattices, p = 1 and 16."""
    import numpy as np

    from draftlattice.lattice import Lattice
    from draftlattice.ngram import NgramLM
    from draftlattice.rescore import rescore

    lm = NgramLM(str(dlm))
    words = lm.words()
    ids = np.array([i for i, w in enumerate(words) if w not in ("<s>", "</s>")])
    rng = np.random.default_rng(0)
    # Unigram-frequency draws: ids are in order of first appearance, so a Zipf-like rank draw
    # over them is a rough stand-in for frequencies.
    cdf = np.cumsum(1.0 / np.arange(1, len(ids) + 1))
    cdf /= cdf[-1]

    def draw(size: int) -> np.ndarray:
        return ids[np.minimum(np.searchsorted(cdf, rng.random(size)), len(ids) - 1)]

    def distinct(size: int) -> np.ndarray:
        picked: list[int] = []
        while len(picked) < size:
            picked.extend(t for t in draw(4 * size).tolist() if t not in picked)
        return np.array(picked[:size])

    batch = []
    for _ in range(lattices):
        tokens = np.stack([distinct(16) for _ in range(8)])
        scores = np.sort(rng.random((8, 16)))[:, ::-1]
        logprobs = np.log(scores / scores.sum(axis=1, keepdims=True))
        batch.append((Lattice.from_topk(tokens, logprobs), draw(3)))
    result = {}
    for p in (1, 16):
        for lattice, context in batch[:10]:  # warm-up
            rescore(lattice, lm, p, 1.0, context)
        times = []
        for lattice, context in batch:
            start = time.perf_counter()
            rescore(lattice, lm, p, 1.0, context)
            times.append(time.perf_counter() - start)
        result[f"p{p}_ms"] = 1000 * statistics.median(times)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (several GB)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--spark", nargs="*", default=["wt2"], help="models also built with the Spark engine")
    parser.add_argument("--spark-partitions", type=int, default=8)
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="K=V",
        help="Spark settings for the Spark builds (default: spark.driver.memory=2g)",
    )
    parser.add_argument("--lmplz", action="store_true", help="compare KenLM's lmplz and build_binary")
    parser.add_argument("--lmplz-bin", type=Path, default=ROOT / "bench" / ".cache" / "kenlm" / "bin")
    parser.add_argument("--lmplz-memory", default="2G", help="lmplz's and build_binary's -S")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lattices", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep-arpa", action="store_true", help="keep each model's one-machine ARPA in --work")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.lmplz and not (args.lmplz_bin / "lmplz").exists():
        parser.error(f"no lmplz in {args.lmplz_bin}: run bench/tools/build_kenlm_tools.sh first")
    conf = {"spark.driver.memory": "2g", "spark.ui.enabled": "false"}
    conf.update(item.split("=", 1) for item in args.spark_conf)
    spark_settings = json.dumps({"partitions": args.spark_partitions, "conf": conf})
    corpora = prepare(args.work)
    report: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_start": os.getloadavg(),
        "models": {},
    }
    for name in args.models:
        spec = dict(MODELS[name])
        corpus = str(corpora[spec.pop("corpus")])
        row: dict = {}
        arpa = args.work / f"{name}.arpa"
        dlm = args.work / f"{name}.dlm"
        built, peak = run_measured([BUILD_CHILD, "local", corpus, str(arpa), json.dumps(spec)])
        row["one_machine"] = {**built, "peak_mb": peak}
        start = time.perf_counter()
        compile_child = (
            "import sys; from draftlattice.ngram import NgramLM; "
            "NgramLM(sys.argv[1]).save(sys.argv[2], overwrite=True); print('{}')"
        )
        _, peak = run_measured([compile_child, str(arpa), str(dlm)])
        row["compile_dlm"] = {"seconds": time.perf_counter() - start, "peak_mb": peak}
        print(name, "one-machine", row["one_machine"], "compile", row["compile_dlm"], flush=True)
        if name in args.spark:
            spark_arpa = args.work / f"{name}.spark.arpa"
            built, peak = run_measured(
                [BUILD_CHILD, "spark", corpus, str(spark_arpa), json.dumps(spec), spark_settings]
            )
            identical = files_equal(spark_arpa, arpa)
            row["spark_local2"] = {**built, "peak_mb": peak, "identical_arpa": identical, "settings": spark_settings}
            print(name, "spark", row["spark_local2"], flush=True)
            spark_arpa.unlink()
        n = sum(row["one_machine"]["counts"])
        loads = [run_measured([LOAD_CHILD, "dlm", str(dlm)])[0] for _ in range(args.repeats)]
        row["dlm_load_s"] = statistics.median(x["seconds"] for x in loads)
        row["dlm_bytes_per_ngram"] = statistics.median(x["rss_bytes"] for x in loads) / n
        row["dlm_file_bytes_per_ngram"] = dlm.stat().st_size / n
        if MODELS[name]["order"] <= KENLM_MAX_ORDER:
            kenlm_load = run_measured([LOAD_CHILD, "kenlm", str(arpa)])[0]
            row["kenlm_arpa_load_s"] = kenlm_load["seconds"]
            row["kenlm_bytes_per_ngram"] = kenlm_load["rss_bytes"] / n
        if args.lmplz and "prune_to" not in MODELS[name]:
            row["kenlm_tools"] = kenlm_tools(MODELS, name, corpus, arpa, n, args)
            print(name, "kenlm tools", row["kenlm_tools"], flush=True)
        row["latency_8x16"] = latency(dlm, args.lattices)
        row["ngrams"] = n
        print(
            name,
            {k: v for k, v in row.items() if k not in ("one_machine", "compile_dlm", "spark_local2", "kenlm_tools")},
            flush=True,
        )
        report["models"][name] = row
        if not args.keep_arpa:
            arpa.unlink()
        report["load_average_end"] = os.getloadavg()
        if args.json:  # after every model, so that a long run keeps what it measured
            args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
