"""Brute-force references for rescoring tests: enumerate all k**h drafts of a lattice and score
each with an independent LM implementation (pure-Python backoff or the kenlm module)."""

from __future__ import annotations

import itertools
import math

import numpy as np

LN10 = math.log(10.0)


def enumerate_drafts(tokens, logprobs, lm_score, alpha):
    """All drafts as (total, ranks, head, lm) sorted by (total desc, ranks asc).

    lm_score(list_of_token_ids) -> natural-log LM probability of the draft given the context.
    """
    h, k = tokens.shape
    rows = []
    for ranks in itertools.product(range(k), repeat=h):
        draft = [int(tokens[t, r]) for t, r in enumerate(ranks)]
        head = sum(float(logprobs[t, r]) for t, r in enumerate(ranks))
        lm = lm_score(draft)
        rows.append((head + alpha * lm, ranks, head, lm))
    rows.sort(key=lambda row: (-row[0], row[1]))
    return rows


class KenlmScorer:
    """Natural-log draft scores from the kenlm module, for an LM whose words are vocab[token]."""

    def __init__(self, model, vocab):
        import kenlm

        self.kenlm = kenlm
        self.model = model
        self.vocab = vocab

    def __call__(self, context, bos):
        def score(draft):
            state, out = self.kenlm.State(), self.kenlm.State()
            if bos:
                self.model.BeginSentenceWrite(state)
            else:
                self.model.NullContextWrite(state)
            for token in context:
                self.model.BaseScore(state, self.vocab[token], out)
                state, out = out, state
            total = 0.0
            for token in draft:
                total += self.model.BaseScore(state, self.vocab[token], out)
                state, out = out, state
            return total * LN10

        return score


def python_scorer(reference_lm, words_of, context, bos):
    """Draft scorer over tests/ngram_reference.BruteForceLM (words_of: token id -> LM word)."""

    def score(draft):
        return sum(reference_lm.sentence([words_of(t) for t in draft], [words_of(t) for t in context], bos))

    return score


def check_against_reference(result, rows, p, atol=1e-5):
    """Asserts that result is the top-p of the enumerated rows (robust to near-ties)."""
    n = min(p, len(rows))
    assert result.tokens.shape[0] == n
    assert len({tuple(d) for d in result.tokens.tolist()}) == n, "drafts must be distinct"
    ref_totals = np.array([row[0] for row in rows[:n]])
    np.testing.assert_allclose(result.scores, ref_totals, rtol=0, atol=atol)
    assert np.all(np.diff(result.scores) <= 1e-9), "scores must be best first"
    all_totals = np.array([row[0] for row in rows])
    for i in range(n):
        # a draft whose reference total is isolated from its neighbours must match exactly
        gap_before = all_totals[i - 1] - all_totals[i] if i > 0 else np.inf
        gap_after = all_totals[i] - all_totals[i + 1] if i + 1 < len(rows) else np.inf
        if min(gap_before, gap_after) > 10 * atol:
            assert tuple(result.tokens[i].tolist()) == tuple(rows[i][4]), f"draft {i} differs"
            assert abs(result.head_scores[i] - rows[i][2]) < atol
            assert abs(result.lm_scores[i] - rows[i][3]) < atol


def with_tokens(rows, tokens):
    """Appends the token tuple of each row (index 4)."""
    return [row + (tuple(int(tokens[t, r]) for t, r in enumerate(row[1])),) for row in rows]
