"""paragraph_prompts: headings and short lines skipped, first-N vs evenly spaced, clear errors."""

from __future__ import annotations

import pytest

from draftlattice.evaluate.prompts import paragraph_prompts


class WordTokenizer:
    """Stands in for tokenizers.Tokenizer: one id per whitespace word (its length)."""

    class _Encoding:
        def __init__(self, ids):
            self.ids = ids

    def encode(self, text):
        return self._Encoding([len(word) for word in text.split()])


@pytest.fixture()
def text(tmp_path):
    lines = [" = Heading = ", " ", " a bb ccc ", " dddd ", " = = Sub = = ", " e ff ggg hhhh ", " ii jj kk ", " l m n "]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_first_and_spread(text):
    tok = WordTokenizer()
    assert paragraph_prompts(text, tok, None, 3) == [[1, 2, 3], [1, 2, 3], [2, 2, 2], [1, 1, 1]]
    assert paragraph_prompts(text, tok, 2, 3) == [[1, 2, 3], [1, 2, 3]]
    assert paragraph_prompts(text, tok, 2, 3, spread=True) == [[1, 2, 3], [2, 2, 2]]


def test_errors(text, tmp_path):
    tok = WordTokenizer()
    with pytest.raises(ValueError, match="only 4 paragraphs have 3 tokens, 5 wanted"):
        paragraph_prompts(text, tok, 5, 3)
    with pytest.raises(ValueError, match="only 0 paragraphs"):
        paragraph_prompts(text, tok, None, 10)
    with pytest.raises(ValueError, match="count and length"):
        paragraph_prompts(text, tok, 0, 3)
    with pytest.raises(FileNotFoundError, match="prompt file not found"):
        paragraph_prompts(tmp_path / "missing.txt", tok, 1, 3)
