"""Prompts from the paragraphs of a text file (WikiText layout), tokenized (demo, traces, benchmarks).

One rule for the demo, traces and benchmarks: the stripped, non-blank lines that are not section
headings (``= ... =``), each cut to its first ``length`` tokens; lines with fewer tokens are
skipped. Either the first ``count`` such prompts in file order, or (``spread=True``) ``count``
prompts evenly spaced through the file, so a short run still samples the whole document set.
"""

from __future__ import annotations

from pathlib import Path


def paragraph_prompts(
    path: str | Path, tokenizer, count: int | None, length: int, spread: bool = False
) -> list[list[int]]:
    """Token-id prompts [count][length] from ``path`` using a ``tokenizers.Tokenizer``.

    ``count=None`` keeps every eligible paragraph (``spread`` then changes nothing).
    Raises FileNotFoundError for a missing file and ValueError when too few paragraphs qualify.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: prompt file not found")
    if length < 1 or (count is not None and count < 1):
        raise ValueError(f"count and length must be >= 1, got count={count}, length={length}")
    eligible = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or (text.startswith("=") and text.endswith("=")):
            continue
        ids = tokenizer.encode(text).ids
        if len(ids) >= length:
            eligible.append(ids[:length])
            if count is not None and not spread and len(eligible) == count:
                break
    wanted = len(eligible) if count is None else count
    if len(eligible) < wanted or not eligible:
        raise ValueError(f"{path}: only {len(eligible)} paragraphs have {length} tokens, {wanted} wanted")
    if spread:
        return [eligible[i * len(eligible) // wanted] for i in range(wanted)]
    return eligible[:wanted]
