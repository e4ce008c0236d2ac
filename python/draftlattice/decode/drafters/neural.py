"""Local neural rescoring of the heads' top-k (Kim et al. 2024, Algorithm 2).

Left to right over the draft positions i = 1..g: among the k most likely tokens of head i+1,
pick the one maximising  log p_head(c) + alpha * log p_LM(c | context, chosen prefix),
where LM is a small causal LM over the same vocabulary (any transformers ``*ForCausalLM``). Per
step the LM reads the last ``window`` tokens of each row's context once (rows left-padded), then
g - 1 one-token forwards with its cache; all of it on the model's device, no target call.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..target import cache_keyword
from .base import Proposal, SampledDrafts, Sampling, topk_lattice


class NeuralDrafter:
    """Greedy left-to-right rescoring of each head's top-k by a small neural LM (one draft).

    Args:
        lm: a transformers causal LM with the target's vocabulary, on the target's device.
        k: candidates per head (>= 1).
        alpha: weight of the LM's log-probability (0 = the heads' top-1 drafts).
        window: context tokens the LM reads per step (the most recent ones).
    """

    name = "neural"
    p = 1
    sample_rules: tuple[str, ...] = ()  # greedy decoding only

    def __init__(self, lm, k: int = 4, alpha: float = 0.5, window: int = 64) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        if not 0 <= alpha < float("inf"):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        self.lm, self.k, self.alpha, self.window = lm.eval(), k, float(alpha), window
        self.vocab_size = int(lm.get_output_embeddings().weight.shape[0])
        self._keyword = cache_keyword(lm)

    def propose(self, head_logits: Tensor, sampling: Sampling | None, draws: int) -> Proposal:
        if sampling is not None:
            raise ValueError("neural rescoring drafts greedily (one deterministic draft); it has no sampling mode")
        if head_logits.shape[-1] != self.vocab_size:
            raise ValueError(
                f"the neural LM's vocabulary ({self.vocab_size}) differs from the heads' ({head_logits.shape[-1]})"
            )
        return Proposal([], kept=topk_lattice(head_logits, min(self.k, head_logits.shape[-1])))

    @torch.inference_mode()
    def finish(
        self, proposal: Proposal, host: list[Tensor], contexts: list[list[int]], device: torch.device
    ) -> tuple[Tensor, SampledDrafts | None]:
        ids, logprobs = proposal.kept  # [B, g, k] on the device
        B, g, _ = ids.shape
        recent = [c[-self.window :] for c in contexts]
        width = max(map(len, recent))
        rows = torch.tensor([[0] * (width - len(c)) + c for c in recent], device=ids.device)
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in recent], device=ids.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        from transformers import DynamicCache

        cache, chosen = DynamicCache(), []  # filled in place by the forwards
        out = self.lm(
            input_ids=rows, attention_mask=mask, position_ids=positions, use_cache=True, **{self._keyword: cache}
        )
        lm_logp = out.logits[:, -1].float().log_softmax(-1)
        for i in range(g):
            score = logprobs[:, i] + self.alpha * lm_logp.gather(1, ids[:, i])
            token = ids[:, i].gather(1, score.argmax(-1, keepdim=True))  # [B, 1]
            chosen.append(token)
            if i + 1 < g:
                mask = torch.cat([mask, torch.ones_like(token)], dim=1)
                positions = positions[:, -1:] + 1
                out = self.lm(
                    input_ids=token,
                    attention_mask=mask,
                    position_ids=positions,
                    use_cache=True,
                    **{self._keyword: cache},
                )
                lm_logp = out.logits[:, -1].float().log_softmax(-1)
        return torch.cat(chosen, dim=1).unsqueeze(1).cpu(), None
