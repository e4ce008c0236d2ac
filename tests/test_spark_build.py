"""The Spark engine (draftlattice.spark) against the one-machine C++ trainer, entry by entry.

The one-machine trainer is itself checked against OpenGrm NGram (test_katz.py, test_prune.py);
here the Spark build, run in local mode, must give the same model: the same n-grams, counts,
discounts, probabilities and backoff weights (ARPA written with 17 significant digits, so the
comparison is at full double precision), the same pruned set, and byte-identical files.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from draftlattice import FormatError
from draftlattice.cli.main import main as cli_main
from draftlattice.ngram.build import build_lm as build_one_machine
from lm_helpers import KATZ_REF, WIKITEXT, parse_arpa

TOKENIZER = Path(__file__).resolve().parents[1] / "lm_models" / "tokenizer.json"
WIKI_LINES = 300
SPLIT_BYTES = 4096  # several splits per file, so lines straddle split boundaries


def _import_spark():
    try:
        import pyspark  # noqa: F401

        from draftlattice import spark
    except ImportError:  # never skip for a missing package: say what to install
        pytest.fail("the Spark tests need pyspark: pip install 'draftlattice[spark]' (the test extra has it)")
    return spark


@pytest.fixture(scope="module")
def spark_context():
    """One small local Spark context for the module (starting one takes tens of seconds)."""
    _import_spark()
    from draftlattice.spark.session import java_version, local_worker_settings

    if java_version() is None:  # a system package, not a pip one: skipped with the reason (issue 16)
        pytest.skip(
            "Spark needs a Java runtime (17 or 21) and `java -version` failed: "
            "install one (apt install openjdk-17-jre-headless)"
        )
    from pyspark import SparkConf, SparkContext

    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("draftlattice tests")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.default.parallelism", "2")
        .setAll(list(local_worker_settings().items()))
    )
    context = SparkContext(conf=conf)
    context.setLogLevel("ERROR")
    yield context
    context.stop()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    """Three files, read in name order: the OpenGrm toy corpus, a WikiText-2 slice with blank
    and edge-space lines left in, and lines with tabs, CR, NBSP and whitespace-only lines."""
    folder = tmp_path_factory.mktemp("corpus")
    shutil.copy(KATZ_REF / "corpus.txt", folder / "a_toy.txt")
    with open(WIKITEXT / "train.txt", encoding="utf-8") as source:
        lines = [next(source) for _ in range(WIKI_LINES)]
    (folder / "b_wiki.txt").write_text("".join(lines), encoding="utf-8")
    odd = "the cat\tsat\r\n   \n\u00a0the dog\u00a0 ate \n\t\n= = x = =\nthe cat sat on the mat"
    (folder / "c_odd.txt").write_text(odd, encoding="utf-8")
    return folder


def _files(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


CASES = {
    "order2": {"order": 2},
    "order3-mincount": {"order": 3, "min_counts": [1, 1, 2]},
    "order4-prune-target": {"order": 4, "prune_to": 9000},
    "order4-mincount-threshold": {"order": 4, "min_counts": [1, 2, 2, 3], "prune_threshold": 1e-6},
}


def _assert_same_model(ours: Path, reference: Path) -> None:
    got, got_order = parse_arpa(ours)
    want, want_order = parse_arpa(reference)
    missing = [w for w in want if w not in got][:5]
    extra = [w for w in got if w not in want][:5]
    assert not missing and not extra, f"n-grams missing {missing}, extra {extra}"
    for words, entry in want.items():
        assert got[words] == entry, words  # (log10 p, log10 backoff or None), 17 digits
    assert got_order == want_order
    assert ours.read_bytes() == reference.read_bytes()


def _assert_same_result(ours, reference) -> None:
    for field in (
        "order",
        "sentences",
        "tokens",
        "counts",
        "counts_before_pruning",
        "count_of_counts",
        "discounts",
        "tokenizer_sha256",
    ):
        assert getattr(ours, field) == getattr(reference, field), field


def _build_both_and_compare(spark_context, corpus_dir, tmp_path, options, **spark_options):
    """Builds the corpus with the one-machine trainer and with Spark (`spark_options` on top of
    the shared ones), asserts that the results and the models are the same, returns Spark's."""
    spark = _import_spark()
    reference = build_one_machine(_files(corpus_dir), **options, out_path=tmp_path / "one.arpa", arpa_digits=17)
    ours = spark.build_lm(
        corpus_dir,
        **options,
        out_path=tmp_path / "spark.arpa",
        arpa_digits=17,
        spark=spark_context,
        split_bytes=SPLIT_BYTES,
        **spark_options,
    )
    _assert_same_result(ours, reference)
    _assert_same_model(tmp_path / "spark.arpa", tmp_path / "one.arpa")
    return ours


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_spark_arpa_equals_one_machine(spark_context, corpus_dir, tmp_path, case):
    options = CASES[case]
    ours = _build_both_and_compare(spark_context, corpus_dir, tmp_path, options)
    if "prune_to" in options:
        assert sum(ours.counts) <= options["prune_to"] < sum(ours.counts_before_pruning)
    if "prune_threshold" in options:
        assert sum(ours.counts) < sum(ours.counts_before_pruning)


@pytest.mark.slow
def test_disk_only_storage_and_many_partitions_give_the_same_model(spark_context, corpus_dir, tmp_path):
    """The settings that built the 21 M n-gram model in local mode (docs/SCALE.md): cached tables
    on disk (off the driver JVM's heap), more partitions than cores."""
    options = {"order": 4, "min_counts": [1, 1, 2, 2]}
    _build_both_and_compare(spark_context, corpus_dir, tmp_path, options, partitions=7, storage_level="DISK_ONLY")


def test_unknown_storage_level_is_refused(spark_context, corpus_dir, tmp_path):
    spark = _import_spark()
    with pytest.raises(ValueError, match="storage level must be one of MEMORY_AND_DISK.*got 'MEMORY_ONLY'"):
        spark.build_lm(corpus_dir, 2, out_path=tmp_path / "x.arpa", spark=spark_context, storage_level="MEMORY_ONLY")
    assert not (tmp_path / "x.arpa").exists()


@pytest.mark.slow
def test_complete_states_and_compressed_inputs(spark_context, tmp_path):
    """Contexts followed by every word (OpenGrm's complete states: backoff cost 99, the reserved
    mass on </s>), read from .gz and .xz files."""
    import gzip
    import lzma

    spark = _import_spark()
    folder = tmp_path / "corpus"
    folder.mkdir()
    with gzip.open(folder / "a.txt.gz", "wb") as f:
        f.write(b"a a\na b\na\n")
    with lzma.open(folder / "b.txt.xz", "wb") as f:
        f.write(b"b a\nb b\nb\na b a\n")
    reference = build_one_machine(_files(folder), 3, out_path=tmp_path / "one.arpa", arpa_digits=17)
    ours = spark.build_lm(folder, 3, out_path=tmp_path / "spark.arpa", arpa_digits=17, spark=spark_context)
    _assert_same_result(ours, reference)
    _assert_same_model(tmp_path / "spark.arpa", tmp_path / "one.arpa")
    entries, _ = parse_arpa(tmp_path / "spark.arpa")
    assert entries[("a",)][1] == pytest.approx(-99 / 2.302585092994046)  # a complete state


@pytest.mark.slow
def test_spark_tokenizer_mode_dlm_equals_one_machine(spark_context, corpus_dir, tmp_path):
    """Token ids from the same tokenizer.json, encoded on the executors; .arpa equal at 17 digits,
    and the .dlm scores every corpus token as the one-machine .dlm does (float32 storage)."""
    import numpy as np

    from draftlattice.ngram import NgramLM
    from draftlattice.tokenizer import load_tokenizer

    spark = _import_spark()
    options = {"order": 3, "tokenizer": TOKENIZER, "min_counts": [1, 1, 2], "prune_to": 6000}
    reference = build_one_machine(_files(corpus_dir), **options, out_path=tmp_path / "one.arpa", arpa_digits=17)
    ours = spark.build_lm(corpus_dir, **options, out_path=tmp_path / "spark.arpa", arpa_digits=17, spark=spark_context)
    _assert_same_result(ours, reference)
    assert ours.tokenizer_sha256 is not None
    _assert_same_model(tmp_path / "spark.arpa", tmp_path / "one.arpa")

    build_one_machine(_files(corpus_dir), **options, out_path=tmp_path / "one.dlm")
    spark.build_lm(corpus_dir, **options, out_path=tmp_path / "spark.dlm", spark=spark_context)
    one, sparked = NgramLM(tmp_path / "one.dlm"), NgramLM(tmp_path / "spark.dlm")
    assert sparked.counts == one.counts
    assert dict(sparked.metadata) == dict(one.metadata)
    tokenizer = load_tokenizer(TOKENIZER)
    checked = 0
    for path in _files(corpus_dir):
        for line in path.read_text(encoding="utf-8").splitlines():
            ids = tokenizer.encode(line.strip(), add_special_tokens=False).ids
            if ids:
                want = one.token_scores(ids, bos=True, eos=True)
                got = sparked.token_scores(ids, bos=True, eos=True)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
                checked += len(ids)
    assert checked > 1000


@pytest.mark.slow
def test_cli_engine_spark(spark_context, corpus_dir, tmp_path, capsys):
    """`lm build --engine spark` runs in the process's Spark context and writes the same file."""
    files = [str(p) for p in _files(corpus_dir)]
    assert cli_main(["lm", "build", *files, "--order", "3", "-o", str(tmp_path / "one.arpa")]) == 0
    args = ["lm", "build", str(corpus_dir), "--order", "3", "-o", str(tmp_path / "spark.arpa")]
    assert cli_main([*args, "--engine", "spark", "--partitions", "3"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "spark.arpa").read_bytes() == (tmp_path / "one.arpa").read_bytes()


def test_cli_spark_options_need_the_spark_engine(tmp_path, capsys):
    out = tmp_path / "o.arpa"
    assert cli_main(["lm", "build", str(KATZ_REF / "corpus.txt"), "-o", str(out), "--master", "local[2]"]) == 1
    assert "need --engine spark" in capsys.readouterr().err


@pytest.mark.slow
def test_bad_bytes_raise_the_one_machine_error(spark_context, tmp_path):
    spark = _import_spark()
    path = tmp_path / "latin.txt"
    path.write_bytes(b"ok line\nsecond\nbad \xff\xfe here\n" + b"more words\n" * 500)
    with pytest.raises(FormatError) as one_machine:
        build_one_machine(path, 2, out_path=tmp_path / "o.arpa")
    with pytest.raises(FormatError) as ours:
        spark.build_lm(path, 2, out_path=tmp_path / "s.arpa", spark=spark_context, split_bytes=64)
    assert str(ours.value) == str(one_machine.value)
    assert "line 3 (byte offset 19)" in str(ours.value)


@pytest.mark.slow
def test_decompression_bomb_is_refused_like_one_machine(spark_context, tmp_path, capsys):
    spark = _import_spark()
    path = tmp_path / "bomb.txt.gz"
    path.write_bytes(gzip.compress(b"the cat sat\n" * 700_000))  # 8.4 MB in about 20 KB
    assert path.stat().st_size * 200 < 8_400_000
    limit = 1 << 20
    with pytest.raises(FormatError) as one_machine:
        build_one_machine(path, 2, out_path=tmp_path / "o.arpa", max_decompressed_bytes=limit)
    with pytest.raises(FormatError) as ours:
        spark.build_lm(path, 2, out_path=tmp_path / "s.arpa", spark=spark_context, max_decompressed_bytes=limit)
    assert str(ours.value) == str(one_machine.value)
    assert str(path) in str(ours.value) and f"max_decompressed_bytes={limit} " in str(ours.value)
    args = ["lm", "build", str(path), "-o", str(tmp_path / "c.arpa"), "--engine", "spark"]
    assert cli_main([*args, "--max-decompressed-bytes", "1M"]) == 1
    assert str(one_machine.value) in capsys.readouterr().err
    assert not (tmp_path / "s.arpa").exists() and not (tmp_path / "c.arpa").exists()


@pytest.mark.slow
@pytest.mark.parametrize("compressed", [False, True])
def test_over_long_line_is_refused_like_one_machine(spark_context, tmp_path, compressed):
    # A line one byte over the bound (64 MiB) between short ones; plain files are cut into
    # splits that start inside the long line, which only its owner may report.
    spark = _import_spark()
    from draftlattice.ngram.build import _MAX_LINE_BYTES

    data = b"ok line\n" + b"x" * (_MAX_LINE_BYTES + 1) + b"\nmore words\n"
    path = tmp_path / ("long.txt.gz" if compressed else "long.txt")
    path.write_bytes(gzip.compress(data, 1) if compressed else data)
    with pytest.raises(FormatError) as one_machine:
        build_one_machine(path, 2, out_path=tmp_path / "o.arpa")
    with pytest.raises(FormatError) as ours:
        spark.build_lm(path, 2, out_path=tmp_path / "s.arpa", spark=spark_context, split_bytes=24 << 20)
    assert str(ours.value) == str(one_machine.value)
    assert f"line 2 (byte offset 8) is longer than {_MAX_LINE_BYTES} bytes" in str(ours.value)


def test_read_split_bounds_lines_as_the_one_machine_reader(tmp_path, monkeypatch):
    """At most the bound (the newline not counted) passes; one byte more is the one-machine error."""
    _import_spark()
    from draftlattice.ngram import build as one_machine_module
    from draftlattice.spark.corpus import CorpusError, plan_splits, read_split

    monkeypatch.setattr(one_machine_module, "_MAX_LINE_BYTES", 10)
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"a\n" + b"x" * 10 + b"\n" + b"y" * 10)  # the last line without its newline
    assert [raw for split in plan_splits([ok], 4) for _, raw, _ in read_split(split)] == [
        b"a\n",
        b"x" * 10 + b"\n",
        b"y" * 10,
    ]
    for tail in (b"\n", b""):
        bad = tmp_path / "bad.txt"
        bad.write_bytes(b"a\n" + b"x" * 11 + tail)
        with pytest.raises(FormatError) as one_machine:
            build_one_machine(bad, 2, out_path=tmp_path / "o.arpa")
        for split_bytes in (1, 4, 100):
            with pytest.raises(CorpusError) as ours:
                [line for split in plan_splits([bad], split_bytes) for line in read_split(split)]
            assert str(ours.value).endswith(str(one_machine.value)), split_bytes
        assert "line 2 (byte offset 2) is longer than 10 bytes" in str(one_machine.value)


@pytest.mark.slow
def test_empty_corpus(spark_context, tmp_path):
    spark = _import_spark()
    path = tmp_path / "blank.txt"
    path.write_bytes(b"\n  \n\t\n")
    with pytest.raises(ValueError, match="empty corpus"):
        spark.build_lm(path, 3, out_path=tmp_path / "o.arpa", spark=spark_context)


def test_splits_read_every_line_once(tmp_path):
    """Byte-range splits own the lines that start in them: none lost, none doubled."""
    _import_spark()
    from draftlattice.spark.corpus import plan_splits, read_split

    path = tmp_path / "lines.txt"
    data = b"".join(b"w%d " % i * (i % 7) + b"\n" for i in range(300)) + b"last line without newline"
    path.write_bytes(data)
    expected = []
    offset = 0
    for line in data.splitlines(keepends=True):
        expected.append((offset, line))
        offset += len(line)
    for split_bytes in (1, 2, 5, 17, 64, 1000, len(data), 10 * len(data)):
        got = [(pos, raw) for split in plan_splits([path], split_bytes) for pos, raw, _ in read_split(split)]
        assert got == expected, split_bytes


def test_expand_inputs_orders_directories_and_globs(tmp_path):
    _import_spark()
    from draftlattice.spark.corpus import expand_inputs

    for name in ("b.txt", "a.txt", "c.gz"):
        (tmp_path / name).write_bytes(b"x\n")
    assert [p.name for p in expand_inputs(tmp_path)] == ["a.txt", "b.txt", "c.gz"]
    assert [p.name for p in expand_inputs([str(tmp_path / "*.txt"), tmp_path / "c.gz"])] == ["a.txt", "b.txt", "c.gz"]
    with pytest.raises(FileNotFoundError, match="no corpus files match"):
        expand_inputs(str(tmp_path / "*.xz"))
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        expand_inputs(tmp_path / "missing.txt")
