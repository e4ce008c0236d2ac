"""Prompts for traces: lines of a text file, or paragraphs of WikiText-2 test, tokenized.

WikiText prompts: the stripped non-blank lines of the file that are not section headings
(``= ... =``), in file order; each line tokenized with the model's tokenizer and cut to its first
``prompt_tokens`` tokens; lines shorter than that are skipped. The first ``count`` are used.
"""

from __future__ import annotations

from pathlib import Path


def _tokenizer(path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def prompts_from_lines(lines, tokenizer_path, count: int | None, prompt_tokens: int) -> list[list[int]]:
    tokenizer = _tokenizer(tokenizer_path)
    out = []
    for line in lines:
        text = line.strip()
        if not text or (text.startswith("=") and text.endswith("=")):
            continue
        ids = tokenizer.encode(text).ids
        if len(ids) >= prompt_tokens:
            out.append(ids[:prompt_tokens])
        if count is not None and len(out) == count:
            break
    if not out:
        raise ValueError(f"no prompt line has >= {prompt_tokens} tokens")
    return out


def prompts_from_file(path, tokenizer_path, count: int | None = None, prompt_tokens: int = 32):
    return prompts_from_lines(Path(path).read_text(encoding="utf-8").splitlines(), tokenizer_path,
                              count, prompt_tokens)
