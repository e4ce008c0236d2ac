"""Local neural rescoring of the heads' top-k (Kim et al. 2024, Algorithm 2).

Left to right over the draft positions i = 1..g: among the k most likely tokens of head i+1,
pick the one maximising  log p_head(c) + alpha * log p_LM(c | context, chosen prefix),
where LM is a small autoregressive model over the same tokenizer. The drafter keeps the LM's KV
cache between steps and only feeds what changed (the tokens committed since the last step; the
cache is cropped to the longest prefix shared with the new context), then g - 1 one-token
forwards. All of it is local to the drafter: no target call.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..sampling import SamplingConfig, sample_categorical, scatter_candidates, seen_tokens
from .base import Drafts, check_head_logits


class NeuralDrafter:
    """Greedy left-to-right rescoring of each head's top-k by a small neural LM.

    Args:
        lm: a blockwise model (``draftlattice.decode.target.BlockwiseTarget``; head 1 is used) with
            the target's vocabulary, on the target's device.
        k: candidates per head (>= 1).
        alpha: weight of the LM's log-probability (0 = vanilla drafts).
        window: when the context no longer fits the LM's positions, the LM restarts on the last
            ``window`` tokens (default: half its max_seq_len).
    """

    name = "neural"
    num_drafts = 1

    def __init__(self, lm: torch.nn.Module, k: int = 4, alpha: float = 0.5, window: int | None = None) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        limit = getattr(lm.config, "max_seq_len", None) or 1 << 30
        window = limit // 2 if window is None else window
        if not 1 <= window < limit:
            raise ValueError(f"window must be in [1, {limit}), got {window}")
        self.lm = lm.eval()
        self.k, self.alpha, self.window, self._limit = k, float(alpha), window, limit
        self.vocab_size = int(lm.config.vocab_size)
        self._cache = None
        self._fed: list[int] = []  # tokens whose keys/values are in self._cache, in order

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        return Drafts(self._run(head_logits, context, None, None)[0][None])

    def sample(
        self,
        head_logits: torch.Tensor,
        context: Sequence[int],
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        n: int = 1,
        distinct_first: bool = False,
    ) -> Drafts:
        if n != 1 or distinct_first:
            raise ValueError(f"the neural drafter samples one draft per step (verifier 'block' or 'token'), got n={n}")
        check_head_logits(head_logits)
        seen = seen_tokens(context, head_logits.shape[1], device=head_logits.device)
        head_logprobs = sampling.distribution(head_logits.float(), seen).log()  # processed like the target
        tokens, q = self._run(head_logprobs, context, sampling, generator)
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
        lm_logits = self._condition_on(list(context), g)
        cache = self._cache
        head_lp = torch.log_softmax(head_logits.float(), -1)
        device = head_logits.device
        tokens = torch.empty(g, dtype=torch.int64, device=device)
        q = torch.zeros(g, vocab, device=device) if sampling is not None else None
        for i in range(g):
            cand_lp, cand = head_lp[i].topk(k)
            score = cand_lp + self.alpha * torch.log_softmax(lm_logits.float(), -1).to(device)[cand]
            if sampling is None:
                choice = int(score.argmax())
            else:
                probs = torch.softmax(score, -1)
                choice = int(sample_categorical(probs, generator))
                q[i] = scatter_candidates(cand, probs, vocab)
            tokens[i] = cand[choice]
            if i + 1 < g:
                lm_logits = self._head1(tokens[i : i + 1][None], cache)
                self._fed.append(int(tokens[i]))
        return tokens, q

    def _condition_on(self, context: list[int], g: int) -> torch.Tensor:
        """LM logits [V] after ``context``, reusing the cache's longest shared prefix."""
        if len(context) + g > self._limit:  # restart on a window (positions restart at 0)
            context = context[-self.window :]
            self._cache, self._fed = None, []
        shared = 0
        for a, b in zip(self._fed, context):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(context) - 1)  # feed at least one token to get its logits
        if self._cache is None or shared == 0:
            self._cache, shared = self.lm.new_cache(), 0
        else:
            self._cache.crop(shared)
        self._fed = list(context)
        return self._head1(torch.tensor([context[shared:]], device=self.lm.device), self._cache)

    def _head1(self, input_ids: torch.Tensor, cache) -> torch.Tensor:
        """The LM's head-1 logits [V] after input_ids [1, T] (cache extended in place)."""
        return self.lm.head1_logits(self.lm.trunk(input_ids.to(self.lm.device), cache)[0, -1])
