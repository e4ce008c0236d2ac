"""Blockwise parallel decoding (Stern et al. 2018) with drafters and lossless verification.

State between steps: the KV cache holds every committed token except the last one, ``pending``,
which is already decided (head 1's argmax in greedy mode, a verifier's draw in sampling mode); and
``heads`` [h, V] are the model's head outputs at the last cached position, so heads 2..h predict
the g = h - 1 tokens that follow ``pending``. One step:

1. draft: the drafter turns heads 2..h into drafts d [p, g] (context = committed + pending);
2. verify: ONE target forward on the rows [pending, d_1 .. d_g] (p rows batched, or one tree)
   gives head 1's prediction after every draft prefix (acceptance) and, at the last accepted
   position, all heads' outputs for the next block (Stern et al.'s combined verify/predict step);
3. commit pending + the a accepted draft tokens, keep the verifier's next token as the new
   pending, and roll the cache back to the accepted path (crop, or select tree nodes).

Each step therefore costs one serial call and commits 1..h tokens. In greedy mode the output is
the target's greedy output exactly; in sampling mode (block or token verification) the output
distribution is the target's exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .. import verify
from .drafters.base import Drafter, Drafts, empty_drafts
from .sampling import SamplingConfig, sample_categorical, seen_tokens
from .sampling_step import SAMPLING_VERIFIERS, draft_for_sampling, sampling_step
from .stats import DecodeStats
from .target import BlockwiseTarget, check_positions, check_target

logger = logging.getLogger(__name__)

VERIFIERS = ("greedy", "tree", *SAMPLING_VERIFIERS)


@dataclass
class DecodeResult:
    """Output of one ``generate`` call: the new tokens (prompt excluded) and the run's statistics."""

    tokens: list[int]
    stats: DecodeStats


class BlockwiseDecoder:
    """Blockwise parallel decoder around a model with h heads.

    Args:
        model: a blockwise target (``draftlattice.decode.target.BlockwiseTarget``: the built-in
            ``BlockwiseLM`` or ``draftlattice.hf.HFBlockwiseLM``); every tensor the decoder
            creates is created on ``model.device``.
        drafter: turns heads 2..h into drafts (see ``draftlattice.decode.drafters``).
        verifier: "greedy" (drafts verified as p batched rows), "tree" (the drafts' prefix tree in
            one row with a tree attention mask) -- both greedy decoding; "block" (block
            verification, Sun et al. 2024) or "token" (token-by-token speculative sampling) --
            lossless sampling, one draft per step; "multi" (p sampled drafts, recursive rejection
            sampling), "multi-wor" (p drafts with distinct first tokens, without replacement) or
            "tree-sample" (the p greedy drafts, tree rule) -- lossless sampling with several
            drafts (see ``sampling_step``).
        sampling: the target's sampling settings for the sampling verifiers (default: temperature 1).
    """

    def __init__(
        self,
        model: BlockwiseTarget,
        drafter: Drafter,
        verifier: str = "greedy",
        sampling: SamplingConfig | None = None,
    ) -> None:
        if verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {VERIFIERS}, got {verifier!r}")
        if verifier in ("greedy", "tree") and sampling is not None:
            raise ValueError(f"verifier {verifier!r} decodes greedily; use one of {SAMPLING_VERIFIERS} to sample")
        self.model = check_target(model)
        self.drafter = drafter
        self.verifier = verifier
        self.sampling = (sampling or SamplingConfig()) if verifier in SAMPLING_VERIFIERS else None
        self.h = int(model.config.num_heads)
        self.vocab_size = int(model.config.vocab_size)

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        max_new_tokens: int,
        *,
        generator: torch.Generator | None = None,
        eos_token_id: int | None = None,
    ) -> DecodeResult:
        """Decodes up to ``max_new_tokens`` tokens after the prompt.

        Args:
            prompt_ids: [T] token ids, T >= 1.
            max_new_tokens: >= 1.
            generator: randomness of sampling mode (drafts and verification).
            eos_token_id: stop after this token (it is included in the output).
        Returns:
            DecodeResult with the new tokens and this run's DecodeStats.
        """
        prompt = _as_prompt(prompt_ids, self.vocab_size)
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        check_positions(self.model, len(prompt) + max_new_tokens)
        self.model.eval()
        stats = DecodeStats()

        start = time.perf_counter()
        cache = self.model.new_cache()
        prompt_ids = torch.tensor([prompt], device=self.model.device)
        heads = _StepOutput(self.model, prompt_ids, cache).heads(0, len(prompt) - 1)  # [h, V]
        pending = self._first_token(heads[0], prompt, generator)
        stats.serial_calls += 1
        stats.prefill_calls += 1
        stats.prefill_seconds += time.perf_counter() - start

        context = list(prompt)
        new: list[int] = []
        device = prompt_ids.device  # the target's, asked once: a module's device costs microseconds
        while len(new) + 1 < max_new_tokens and pending != eos_token_id:
            g = min(self.h - 1, max_new_tokens - len(new) - 2)
            context.append(pending)
            start = time.perf_counter()
            drafts = self._draft(heads[1 : 1 + g], context, generator, device)
            stats.drafting_seconds += time.perf_counter() - start

            start = time.perf_counter()
            accepted, pending, heads = self._verify_step(cache, context, drafts, generator)
            stats.verification_seconds += time.perf_counter() - start
            stats.serial_calls += 1
            stats.record_step(1 + len(accepted))

            committed = [context[-1], *accepted]
            new.extend(committed)
            context.extend(accepted)
            if eos_token_id is not None and eos_token_id in committed:
                break
        else:
            new.append(pending)

        if eos_token_id is not None and eos_token_id in new:
            new = new[: new.index(eos_token_id) + 1]
        new = new[:max_new_tokens]
        stats.new_tokens = len(new)
        logger.debug("generate: %s", stats.summary())
        return DecodeResult(new, stats)

    # -- one step ------------------------------------------------------------------------------

    def _first_token(self, head1_logits: torch.Tensor, prompt: list[int], generator: torch.Generator | None) -> int:
        if self.sampling is None:
            return int(head1_logits.argmax())
        seen = seen_tokens(prompt, self.vocab_size, device=head1_logits.device)
        return int(sample_categorical(self.sampling.distribution(head1_logits.float(), seen), generator))

    def _draft(self, head_logits: torch.Tensor, context: list[int], generator, device: torch.device) -> Drafts:
        """The drafter's drafts, on the target's ``device`` (drafters backed by the C++ core return
        host tensors)."""
        if head_logits.shape[0] == 0:
            return empty_drafts(self.vocab_size, self.sampling is not None, device)
        if self.sampling is None:
            drafts = self.drafter.propose(head_logits, context)
            _check_drafts(drafts, head_logits.shape[0])
        else:
            drafts = draft_for_sampling(self.drafter, self.verifier, head_logits, context, self.sampling, generator)
        if drafts.tokens.device == device and (drafts.q is None or drafts.q.device == device):
            return drafts
        return Drafts(drafts.tokens.to(device), None if drafts.q is None else drafts.q.to(device))

    def _verify_step(self, cache, context: list[int], drafts: Drafts, generator):
        """Returns (accepted draft tokens, next pending token, heads [h, V] for the next block)."""
        if self.verifier == "tree":
            return _tree_step(self.model, cache, context[-1], drafts.tokens)
        if self.verifier == "greedy":
            return _batched_greedy_step(self.model, cache, context[-1], drafts.tokens)
        forward = lambda rows, kv: _StepOutput(self.model, rows, kv)  # noqa: E731
        return sampling_step(forward, cache, context, drafts, self.sampling, self.verifier, generator)


class _StepOutput:
    """One verification forward, computing only what a decoding step needs.

    Acceptance needs head 1 at every input position, the next block's drafts need all h heads at
    the one accepted position only. The target's trunk runs once (the serial call); heads 2..h are
    evaluated on the accepted position after acceptance, which with h = 8 and a 4096 vocabulary
    removes most of the output-projection work.
    """

    def __init__(self, target: BlockwiseTarget, input_ids, cache, position_ids=None, attention_mask=None) -> None:
        self._target = target
        self._z = target.trunk(input_ids, cache, position_ids, attention_mask)  # [B, T, d]

    def head1(self) -> torch.Tensor:
        """Head 1's logits [B, T, V] at every input position."""
        return self._target.head1_logits(self._z)

    def heads(self, row: int, position: int) -> torch.Tensor:
        """All heads' logits [h, V] at one input position of one row."""
        return self._target.head_logits(self._z[row : row + 1, position : position + 1])[0, 0]


def _batched_greedy_step(target: BlockwiseTarget, cache, pending: int, drafts: torch.Tensor):
    """Verifies p drafts [p, g] as p rows of one forward (cache expanded to p rows)."""
    p, g = drafts.shape
    prefix = cache.length
    roots = torch.full((p, 1), pending, dtype=torch.int64, device=drafts.device)
    rows = torch.cat([roots, drafts], dim=1)  # [p, g+1]
    if p > 1:
        cache.expand(p)
    out = _StepOutput(target, rows, cache)
    best, num_accepted, next_token = verify.greedy_accept(drafts, out.head1())  # head 1: [p, g+1, V]
    if p > 1:
        cache.batch_select(best.reshape(1))
    best, a = int(best), int(num_accepted)
    cache.crop(prefix + 1 + a)
    return drafts[best, :a].tolist(), int(next_token), out.heads(best, a)


def _tree_step(target: BlockwiseTarget, cache, pending: int, drafts: torch.Tensor):
    """Verifies the prefix tree of the drafts (root = pending) in one row with a tree mask."""
    prefix = cache.length
    tree = verify.build_tree(drafts, root_token=pending, position_offset=prefix, dtype=target.dtype)
    out = _StepOutput(
        target,
        tree.tokens[None],
        cache,
        position_ids=tree.position_ids[None],
        attention_mask=tree.attention_mask_4d(prefix),
    )
    result = verify.tree_greedy_accept(tree, out.head1()[0])  # head 1 at every node: [T, V]
    a = int(result.num_accepted)
    path = result.path[: a + 1]  # root, then the accepted nodes by depth
    cache.select(prefix + path, prefix=prefix)  # the committed prefix, the root and the accepted nodes
    return tree.tokens[path[1:]].tolist(), int(result.next_token), out.heads(0, int(result.last_node))


def _as_prompt(prompt_ids, vocab: int) -> list[int]:
    ids = prompt_ids.tolist() if isinstance(prompt_ids, torch.Tensor) else list(prompt_ids)
    if not ids or any(not isinstance(t, int) for t in ids):
        raise ValueError(f"prompt_ids must be a non-empty 1-D sequence of token ids, got {prompt_ids!r:.80}")
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"prompt token ids out of range [0, {vocab}): {bad[:5]}")
    return ids


def _check_drafts(drafts: Drafts, g: int) -> None:
    tokens = drafts.tokens
    if tokens.dim() != 2 or tokens.shape[1] != g or tokens.shape[0] < 1:
        raise ValueError(f"drafter returned tokens of shape {tuple(tokens.shape)}, expected [p, {g}]")
