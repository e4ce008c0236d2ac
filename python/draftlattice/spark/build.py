"""``build_lm`` on Spark: the one-machine trainer's model, computed where the corpus lives.

Jobs, in order (each n-gram table stays distributed; the driver gets the vocabulary, the
count-of-counts, theta and, for writing, one sorted partition at a time):

1. read + tokenize on the executors (corpus.py), count all orders (counting.py);
2. vocabulary to the driver, word ids by first appearance, broadcast;
3. count-of-counts (min-count filtered) to the driver, Katz discounts there (discounts.py);
4. per order 2..N: join with the order below on the suffix, range-partition by context, walk
   each context: probabilities, complete states, backoff weights, pruning scores; the walk of
   order k also emits the ARPA rows of order k - 1 in key order (estimate.py, partition.py);
5. optional relative-entropy pruning and backoff recomputation (prune.py, backoff.py);
6. ARPA streamed from the sorted partitions (arpa.py), compiled to ``.dlm`` by the C++ engine
   when asked. The result equals the one-machine trainer's (tests/test_spark_build.py).
"""

from __future__ import annotations

import logging
import math
import operator
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import _core
from .._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES, check_limit
from ..ngram.build import TOKENIZER_SHA256_KEY, LmBuildResult
from ..tokenizer import load_tokenizer, tokenizer_sha256
from . import arpa, backoff, corpus, counting, discounts, estimate, partition, prune
from .keys import prefix
from .session import spark_context, translate_executor_errors

logger = logging.getLogger(__name__)

__all__ = ["build_lm"]

STORAGE_LEVEL_KEY = "spark.draftlattice.storageLevel"
STORAGE_LEVELS = ("MEMORY_AND_DISK", "MEMORY_AND_DISK_2", "DISK_ONLY", "DISK_ONLY_2")
MAX_SPLIT_BYTES = 64 << 20
MIN_SPLIT_BYTES = 1 << 20


def build_lm(
    corpus_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    order: int,
    *,
    out_path: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | None = None,
    min_counts: Sequence[int] | None = None,
    prune_to: int | None = None,
    prune_threshold: float | None = None,
    overwrite: bool = False,
    arpa_digits: int = 7,
    spark: Any = None,
    master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    partitions: int | None = None,
    split_bytes: int | None = None,
    storage_level: str | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> LmBuildResult:
    """Builds the same Katz backoff LM as :func:`draftlattice.ngram.build.build_lm`, on Spark.

    Args:
      corpus_paths: text files, directories (their files in name order) or glob patterns, at
        paths every executor can read. Read in the order given, as the one-machine build.
      order, out_path, tokenizer, min_counts, prune_to, prune_threshold, overwrite,
        arpa_digits: as in :func:`draftlattice.ngram.build.build_lm`. A ``.dlm`` is compiled from a
        17-digit ARPA whatever ``arpa_digits`` says: its values are the estimate's doubles
        rounded once to float32.
      spark: a running SparkSession or SparkContext to use (left running); None starts one.
      master: Spark master URL for a new context (``local[*]``, ``spark://host:7077``,
        ``yarn``, ``k8s://...``); ignored when ``spark`` is given.
      spark_conf: extra Spark settings for a new context (e.g. ``spark.executor.memory``).
      partitions: shuffle partitions of the n-gram tables (default: the context's default
        parallelism, at least 2); raise it so one partition fits an executor's memory.
      split_bytes: input split size for plain-text files (compressed files are one split);
        default: enough splits for two tasks per core, at most 64 MiB each.
      storage_level: where the cached n-gram tables live: ``MEMORY_AND_DISK`` (default) or
        ``DISK_ONLY`` (or their ``_2`` replicated forms); default: the context's
        ``spark.draftlattice.storageLevel`` setting, else ``MEMORY_AND_DISK``. In local mode the
        executor is the driver JVM; ``DISK_ONLY`` keeps large tables off its heap (docs/SCALE.md).
      max_decompressed_bytes: as in :func:`draftlattice.ngram.build.build_lm`: a compressed corpus
        file is refused (FormatError naming the file and the limit) once more than this many
        bytes come out of it; lines over 64 MiB are refused as there too.

    Raises the one-machine build's exceptions for bad parameters and corpora; ImportError when
    pyspark is missing, FileNotFoundError when Java is.
    """
    _core.check_build_options(order, min_counts, prune_threshold, prune_to)  # the one-machine build's checks
    check_limit(max_decompressed_bytes)
    mins = list(min_counts) if min_counts is not None else [1] * order
    files = corpus.expand_inputs(corpus_paths)
    out = Path(out_path)
    if out.suffix.lower() not in (".arpa", ".dlm"):
        raise ValueError(f"output must end in .arpa or .dlm, got {out}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists (pass overwrite=True / --force to replace it)")
    if not out.parent.exists():
        raise FileNotFoundError(f"output directory does not exist: {out.parent}")
    tokenizer_json = tok_sha = None
    if tokenizer is not None:
        load_tokenizer(tokenizer)  # fails here, on the driver, for a missing or broken file
        tokenizer_json = Path(tokenizer).read_text(encoding="utf-8")
        tok_sha = tokenizer_sha256(tokenizer)
    with spark_context(spark, master, spark_conf) as sc:
        parts = partitions or max(2, sc.defaultParallelism)
        if split_bytes is None:
            total = sum(path.stat().st_size for path in files)
            split_bytes = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, total // (2 * sc.defaultParallelism)))
        splits = corpus.plan_splits(files, split_bytes)
        level = storage_level or sc.getConf().get(STORAGE_LEVEL_KEY, "MEMORY_AND_DISK")
        if level not in STORAGE_LEVELS:
            raise ValueError(f"storage level must be one of {', '.join(STORAGE_LEVELS)}, got {level!r}")
        job = _Job(sc, order, mins, parts, level, max_decompressed_bytes)
        try:
            return job.run(splits, files, tokenizer_json, tok_sha, prune_to, prune_threshold, out, arpa_digits)
        finally:
            job.release()


class _Job:
    """The cached RDDs and broadcasts of one build (kept to release them at the end)."""

    def __init__(
        self, sc: Any, order: int, mins: list[int], partitions: int, storage_level: str, max_decompressed_bytes: int
    ) -> None:
        from pyspark import StorageLevel

        self.sc = sc
        self.order = order
        self.mins = mins or [1] * order
        self.partitions = partitions
        self.max_decompressed_bytes = max_decompressed_bytes
        self.storage = getattr(StorageLevel, storage_level)
        self.cached: list[Any] = []
        self.broadcasts: list[Any] = []
        self.seconds: dict[str, float] = {}

    def keep(self, rdd: Any) -> Any:
        self.cached.append(rdd.persist(self.storage))
        return rdd

    def drop(self, rdd: Any) -> None:
        """Unpersists a cached RDD no later job reads."""
        rdd.unpersist()
        self.cached.remove(rdd)

    def release(self) -> None:
        for rdd in self.cached:
            rdd.unpersist()
        for broadcast in self.broadcasts:
            broadcast.unpersist()

    def run(self, splits, files, tokenizer_json, tok_sha, prune_to, prune_threshold, out, digits) -> LmBuildResult:
        start = time.perf_counter()
        vocab, levels, totals, all_orders = self.count(splits, files, tokenizer_json)
        self.seconds["count"] = time.perf_counter() - start

        start = time.perf_counter()
        pruning = self.order >= 2 and (prune_to is not None or prune_threshold is not None)
        if prune_to is not None and prune_to < len(vocab):
            raise ValueError(
                f"prune target {prune_to} is below the number of unigrams ({len(vocab)} including <s>), "
                "which are never pruned"
            )
        coc, discount_table = self.count_of_counts(vocab, levels)  # materializes each order's cache
        self.drop(all_orders)  # later jobs read only the per-order tables
        estimated, rows, counts_before = self.estimate(vocab, levels, totals, discount_table, pruning)
        self.seconds["estimate"] = time.perf_counter() - start

        start = time.perf_counter()
        counts = counts_before
        if pruning:
            rows, counts = self.prune(vocab, estimated, counts_before, prune_to, prune_threshold)
        self.seconds["prune"] = time.perf_counter() - start

        start = time.perf_counter()
        from tqdm.auto import tqdm

        metadata = [] if tok_sha is None else [(TOKENIZER_SHA256_KEY, tok_sha)]
        with tqdm(
            total=sum(counts), desc="writing ARPA", unit=" n-grams", disable=not sys.stderr.isatty(), leave=False
        ) as bar:
            # A .dlm is compiled from a full-precision (17-digit) ARPA: each value is the double
            # the estimate computed, rounded once, to the binary's float32.
            arpa_digits = 17 if out.suffix.lower() == ".dlm" else digits
            tmp = arpa.write_arpa_atomically(out, rows, counts, vocab.spellings, arpa_digits, metadata, bar.update)
        try:
            if out.suffix.lower() == ".dlm":
                from ..ngram import NgramLM

                NgramLM(str(tmp)).save(str(out), overwrite=True)  # atomic: temporary file, then rename
            else:
                os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        self.seconds["write"] = time.perf_counter() - start
        return LmBuildResult(
            path=out,
            order=self.order,
            sentences=vocab.sentences,
            tokens=vocab.tokens,
            counts=counts,
            counts_before_pruning=counts_before,
            tokenizer_sha256=tok_sha,
            seconds=self.seconds,
            count_of_counts=coc,
            discounts=discount_table,
        )

    def count(self, splits, files, tokenizer_json):
        """Vocabulary (driver); per order >= 2 the kept (key, (count, first)) and the context
        totals (h, c(h)) over all successors (distributed); the cached table of all orders."""
        limit = self.max_decompressed_bytes
        sentences = self.sc.parallelize(splits, len(splits)).flatMap(
            lambda split: corpus.sentence_words(corpus.read_split(split, limit), tokenizer_json)
        )
        counts = self.keep(counting.count_ngrams(sentences, self.order, self.partitions))
        with translate_executor_errors():
            unigrams = counts.filter(lambda item: len(item[0]) == 1).collect()
        vocab = counting.Vocabulary(unigrams)
        if vocab.sentences == 0:
            names = ", ".join(str(p) for p in files)
            raise ValueError(f"empty corpus: no words in {names} (empty files or blank lines only)")
        logger.info("counted %d sentences, %d tokens, %d words", vocab.sentences, vocab.tokens, len(vocab))
        ids = self.sc.broadcast(vocab.ids)
        self.broadcasts.append(ids)
        levels, totals = {}, {}
        for k in range(2, self.order + 1):
            # Cached per order: later jobs read one order, not the whole table.
            level = self.keep(counting.to_ids(counts.filter(lambda item, k=k: len(item[0]) == k), ids))
            totals[k] = level.map(lambda item: (prefix(item[0]), item[1][0])).reduceByKey(
                operator.add, self.partitions, partitionFunc=partition.key_hash
            )
            least = self.mins[k - 1]
            levels[k] = level.filter(lambda item, least=least: item[1][0] >= least) if least > 1 else level
        return vocab, levels, totals, counts

    def count_of_counts(self, vocab, levels):
        coc = [discounts.unigram_count_of_counts(vocab.counts)]
        coc += [discounts.count_of_counts(levels[k]) for k in range(2, self.order + 1)]
        table = [discounts.katz_discounts(n) for n in coc]
        logger.info("count-of-counts %s, discounts %s", coc, table)
        return coc, table

    def estimate(self, vocab, levels, totals, discount_table, pruning):
        """{k: (key, Entry) RDD}, {k: ARPA rows RDD in key order} and n-grams per order."""
        entries = estimate.unigram_entries(vocab.counts, pruning)
        estimated = {1: self.keep(self.sc.parallelize(entries, self.partitions))}
        rows = {}
        counts = [len(vocab)]
        for k in range(2, self.order + 1):
            bounds = partition.context_bounds(estimated[k - 1].keys(), counts[-1], self.partitions)
            walked = self.keep(
                estimate.estimate_order(
                    levels[k], totals[k], estimated[k - 1], k, discount_table[k - 1], len(vocab), bounds, pruning
                )
            )
            estimated[k] = self.keep(walked.filter(lambda r: r[0] == "ngram").map(lambda r: (r[1], r[2])))
            rows[k - 1] = walked.filter(lambda r: r[0] == "row").map(lambda r: (r[1], r[2]))
            counts.append(estimated[k].count())
            logger.info("estimated order %d: %d n-grams", k, counts[-1])
        rows[self.order] = estimated[self.order].mapValues(lambda e: (e.p, None))
        return estimated, rows, counts

    def prune(self, vocab, estimated, counts_before, prune_to, prune_threshold):
        """ARPA rows of the pruned model (backoff weights recomputed) and n-grams per order."""
        raised = {k: self.keep(r) for k, r in prune.raise_scores(estimated, self.order, self.partitions).items()}
        scores = raised[2].map(lambda item: item[1][0])
        for k in range(3, self.order + 1):
            scores = scores.union(raised[k].map(lambda item: item[1][0]))
        if prune_to is not None:
            theta = prune.theta_for_target(scores, sum(counts_before[1:]), prune_to - len(vocab), self.partitions)
        else:
            theta = math.log1p(float(prune_threshold))
        pruned = {1: estimated[1]}
        counts = [len(vocab)]
        for k in range(2, self.order + 1):
            pruned[k] = self.keep(prune.apply_theta(raised[k], theta))
            counts.append(pruned[k].count())
        logger.info("relative-entropy pruning: theta=%.4g, removed %d n-grams", theta, sum(counts_before) - sum(counts))
        rows = {}
        for k in range(2, self.order + 1):
            bounds = partition.context_bounds(pruned[k - 1].keys(), counts[k - 2], self.partitions)
            top = k == self.order
            walked = self.keep(backoff.recompute_backoffs(pruned[k], pruned[k - 1], len(vocab), bounds, top))
            rows[k - 1] = walked.filter(lambda r: r[0] == "row").map(lambda r: (r[1], r[2]))
            if k == self.order:
                rows[k] = walked.filter(lambda r: r[0] == "top").map(lambda r: (r[1], r[2]))
        return rows, counts
