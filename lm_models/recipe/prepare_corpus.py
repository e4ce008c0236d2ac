"""Training and held-out text of the default model, in one text convention.

WikiText-2 is word-tokenized (punctuation split off, `` @-@ `` inside hyphenated words, `` @,@ ``
and `` @.@ `` inside numbers, rare words replaced by ``<unk>``); the English Wikipedia sample is
plain text in ``<doc>`` blocks. So that the target, its tokenizer and the n-gram LMs see one
convention (and WikiText-2 valid/test are in-domain for all of them), the Wikipedia text is
rewritten in the WikiText convention by ``wikitext_style`` below. Rare words are *not* replaced
by ``<unk>`` in the Wikipedia text: ``<unk>`` then makes up about 0.4% of the training tokens,
few enough that greedy decoding does not generate it, while WikiText-2 valid/test (which contain
it) stay scoreable.

Held-out slice: every 50th Wikipedia document (by position in the file, counting from 0) is
held out for evaluation and never trained on; WikiText-2 valid/test are never trained on.

usage: python lm_models/recipe/prepare_corpus.py SHARED_DATA_DIR OUT_DIR
writes OUT_DIR/train.txt (WikiText-2 train + the other 49/50 of the sample) and
OUT_DIR/enwiki_heldout.txt; one paragraph per line, blank lines dropped.
"""

from __future__ import annotations

import lzma
import re
import sys
from pathlib import Path

HELDOUT_EVERY = 50

_PUNCT = re.compile(r"""([.,;:!?()\[\]"“”‘’]|'s\b|'(?=\s|$)|(?<=\s)')""")
_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")
_NUM_COMMA = re.compile(r"(?<=\d),(?=\d)")
_NUM_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_SPACES = re.compile(r"\s+")


def wikitext_style(line: str) -> str:
    """Rewrite one line of plain text in WikiText-2's word tokenization."""
    # Separators inside numbers first, as placeholders the punctuation split leaves alone.
    text = _NUM_POINT.sub("\0P\0", _NUM_COMMA.sub("\0C\0", line))
    text = _HYPHEN.sub(" @-@ ", _PUNCT.sub(r" \1 ", text))
    text = text.replace("\0C\0", " @,@ ").replace("\0P\0", " @.@ ")
    return _SPACES.sub(" ", text).strip()


def wikipedia_documents(path: Path):
    """Yield each ``<doc>`` block's paragraph lines (the title line dropped)."""
    lines: list[str] = []
    inside = title_pending = False
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for raw in handle:
            line = raw.strip()
            if line.startswith("<doc "):
                inside, title_pending, lines = True, True, []
            elif line == "</doc>":
                inside = False
                yield lines
            elif inside and line:
                if title_pending:
                    title_pending = False
                    continue
                lines.append(line)


def main(shared: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    train_words = held_words = held_docs = 0
    with (
        open(out / "train.txt", "w", encoding="utf-8") as train,
        open(out / "enwiki_heldout.txt", "w", encoding="utf-8") as held,
    ):
        for raw in open(shared / "wikitext-2" / "train.txt", encoding="utf-8"):
            line = raw.strip()
            if line:
                train.write(line + "\n")
                train_words += len(line.split())
        sample = shared / "enwiki-sample" / "enwiki-sample.txt.xz"
        for index, paragraphs in enumerate(wikipedia_documents(sample)):
            target = held if index % HELDOUT_EVERY == 0 else train
            for paragraph in paragraphs:
                line = wikitext_style(paragraph)
                target.write(line + "\n")
                words = len(line.split())
                if target is held:
                    held_words += words
                else:
                    train_words += words
            held_docs += target is held
    print(f"train.txt: {train_words:,} words; enwiki_heldout.txt: {held_docs:,} documents, {held_words:,} words")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("usage: ")[1].split("\n")[0])
    main(Path(sys.argv[1]), Path(sys.argv[2]))
