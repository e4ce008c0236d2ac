"""Local neural rescoring of the heads' top-k (Kim et al. 2024, Algorithm 2).

Left to right over the draft positions i = 1..g: among the k most likely tokens of head i+1,
pick the one maximising  log p_head(c) + alpha * log p_LM(c | context, chosen prefix),
where LM is a small autoregressive model over the same tokenizer. Cost per step: one LM forward
on the context window plus g - 1 one-token forwards (with a KV cache), local to the drafter.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..model_api import check_positions, new_cache, num_heads, target_forward, vocab_size
from ..sampling import SamplingConfig, sample_categorical, scatter_candidates
from .base import Drafts, check_head_logits


class NeuralDrafter:
    """Greedy left-to-right rescoring of each head's top-k by a small neural LM.

    Args:
        lm: a ``BlockwiseLM`` (head 1 is used) with the target's vocabulary.
        k: candidates per head (>= 1).
        alpha: weight of the LM's log-probability (0 = vanilla drafts).
        window: the LM sees at most this many trailing context tokens (bounded cost per step).
    """

    name = "neural"
    num_drafts = 1

    def __init__(self, lm: torch.nn.Module, k: int = 4, alpha: float = 0.5, window: int = 128) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.lm = lm.eval()
        self.k, self.alpha, self.window = k, float(alpha), window
        self.vocab_size = vocab_size(lm)
        self._lm_heads = num_heads(lm)

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        return Drafts(self._run(head_logits, context, None, None)[0][None])

    def sample(
        self,
        head_logits: torch.Tensor,
        context: Sequence[int],
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> Drafts:
        tokens, q = self._run(head_logits / sampling.temperature, context, sampling, generator)
        return Drafts(tokens[None], q[None])

    @torch.inference_mode()
    def _run(self, head_logits, context, sampling, generator):
        """Greedy (sampling None) or sampled choice per position; returns tokens [g] and q [g, V]."""
        check_head_logits(head_logits)
        g, vocab = head_logits.shape
        if vocab != self.vocab_size:
            raise ValueError(f"neural rescorer vocabulary {self.vocab_size} != target vocabulary {vocab}")
        if not context:
            raise ValueError("neural rescoring needs at least one context token")
        k = min(self.k, vocab)
        window = list(context[-self.window :])
        check_positions(self.lm, len(window) + g)
        cache = new_cache(self.lm)
        lm_logits = target_forward(self.lm, torch.tensor([window]), cache)[0, -1, 0]
        head_lp = torch.log_softmax(head_logits.float(), -1)
        tokens = torch.empty(g, dtype=torch.int64)
        q = torch.zeros(g, vocab) if sampling is not None else None
        for i in range(g):
            cand_lp, cand = head_lp[i].topk(k)
            score = cand_lp + self.alpha * torch.log_softmax(lm_logits.float(), -1)[cand]
            if sampling is None:
                choice = int(score.argmax())
            else:
                probs = torch.softmax(score, -1)
                choice = int(sample_categorical(probs, generator))
                q[i] = scatter_candidates(cand, probs, vocab)
            tokens[i] = cand[choice]
            if i + 1 < g:
                lm_logits = target_forward(self.lm, tokens[i : i + 1][None], cache)[0, -1, 0]
        return tokens, q
