"""Training draft heads on a frozen transformers causal LM.

Head ``j`` (2..h) at position ``t`` learns token ``t + j`` by cross-entropy through the model's
own (frozen) output projection, from the base model's final hidden state (computed without
gradients: one frozen forward per batch, all heads trained together); ``teacher_weight`` mixes
that token with the model's own law for it (:mod:`.head_loss`). Targets:

* a distilled corpus (:func:`draftlattice.training.distill.distill`, the way to train heads worth
  shipping): the model's own continuations of many prompts, learnt from each prompt's last
  position on, which is where decoding drafts;
* ``"data"``: the corpus' own next-j tokens.
* ``"greedy"`` (self-distillation): the base model's greedy continuation of each chunk's first
  ``prompt_len`` tokens; the heads then learn what greedy decoding will verify, which is what
  acceptance depends on. ``"sampled"``: its sampled continuation (the model's own
  generation config: temperature, top-k ...), for heads used with ``do_sample=True``.

The heads train in float32 (master weights) under bf16 autocast; the frozen trunk runs in its
own dtype (bf16 is fast on AMX CPUs and GPUs). The loss never forms [B, T, V] logits
(:mod:`.head_loss`). Two options make a CPU step several times cheaper:

* ``softmax=CandidateSoftmax()``: each head's softmax covers a candidate set (the step's target
  tokens, the corpus' most frequent tokens, uniformly sampled negatives with the log-Q
  correction) instead of the whole vocabulary; held-out accuracy
  (:func:`~draftlattice.training.head_accuracy`) still uses the full softmax;
* ``features=FOLDER`` (a distilled corpus): the frozen trunk's hidden states are computed once
  into a bf16 file (:mod:`.feature_cache`, resumable) and read back, so steps skip the trunk.

Checkpoints (``output_dir``): the heads in the :class:`DraftHeads` format
plus ``trainer_state.pt`` (step, optimizer, schedule, data order); a later call with
``resume=True`` continues there.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..distilled_corpus import DistilledCorpus
from ..hf.heads import DraftHeads, input_embeddings, output_embeddings
from ..tokenizer import corpus_lines, folder_tokenizer, load_tokenizer
from ._progress import duration
from .batches import ChunkBatches, RecordBatches
from .feature_cache import FeatureCache
from .head_loss import (
    CandidateSoftmax,
    candidate_columns,
    candidate_linear_ce,
    check_teacher_weight,
    chunked_linear_ce,
)
from .prefix_gate import PrefixGate

logger = logging.getLogger(__name__)

STATE_NAME = "trainer_state.pt"
TARGETS = ("data", "greedy", "sampled")


@dataclass
class TrainResult:
    """Trained heads and their training curve (one entry per logged step)."""

    heads: DraftHeads
    steps: int
    losses: list[float] = field(default_factory=list)  #: mean cross-entropy over heads
    accuracies: list[list[float]] = field(default_factory=list)  #: per-head top-1 accuracy


def corpus_ids(data, model, tokenizer=None) -> Tensor:
    """1-D int64 token ids of ``data``: token ids as given, or text files (one document per
    line, the model's EOS between lines) encoded with ``tokenizer`` (a folder, a tokenizer.json
    or a ``tokenizers.Tokenizer``; default: the model's folder)."""
    if isinstance(data, Tensor):
        return data.reshape(-1).to(torch.int64).cpu()
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], int):
        return torch.tensor(data, dtype=torch.int64)
    files = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    source = tokenizer if tokenizer is not None else getattr(model.config, "name_or_path", None)
    if source is None or source == "":
        raise ValueError("text data needs a tokenizer (the model has no folder): pass tokenizer=")
    if isinstance(source, (str, os.PathLike)):
        tok = folder_tokenizer(source)[0] if Path(source).is_dir() else load_tokenizer(source)
    else:
        tok = source
    eos = getattr(model.config, "eos_token_id", None)
    eos = eos[0] if isinstance(eos, (list, tuple)) else eos
    ids: list[int] = []
    lines = list(corpus_lines(files))
    for start in range(0, len(lines), 4096):
        for encoding in tok.encode_batch(lines[start : start + 4096], add_special_tokens=False):
            ids.extend(encoding.ids)
            if eos is not None:
                ids.append(int(eos))
    if not ids:
        raise ValueError(f"no tokens in {[str(f) for f in files]}")
    return torch.tensor(ids, dtype=torch.int64)


def head_losses(
    heads: DraftHeads,
    model,
    z: Tensor,
    targets: Tensor,
    valid: Tensor | None = None,
    chunk: int = 1024,
    candidates: tuple[Tensor, Tensor] | None = None,
    teacher_weight: float = 0.0,
    prefix_gate: PrefixGate | None = None,
) -> tuple[Tensor, list[float]]:
    """Mean cross-entropy of heads 2..h and their top-1 accuracies.

    ``z [B, T, d]`` hidden states of ``targets [B, T]``; head j at position t predicts
    ``targets[:, t + j]`` where ``valid[:, t + j]`` (default: everywhere); heads that read the
    next token get ``targets[:, t + 1]``'s embedding. The logits go through
    :func:`chunked_linear_ce`, so no [B, T, V] tensor is formed; with ``candidates`` (``columns,
    log_q`` of :func:`candidate_columns`, holding every target) through the candidate-set softmax
    :func:`candidate_linear_ce` instead, its top-1 counted among the candidates. With
    ``teacher_weight`` > 0, head j's target at t is mixed with the model's own law at ``t + j - 1``
    (``z`` there through the output layer; see :mod:`.head_loss`). With ``prefix_gate``, head j's
    loss at t is weighed by whether heads 2..j-1 had their targets in their top k there
    (:mod:`.prefix_gate`).
    """
    weight = output_embeddings(model).weight
    embed = input_embeddings(model) if heads.reads_next_token else None
    if candidates is not None:
        columns, log_q = candidates
        weight_columns = weight.detach()[columns]  # gathered once, shared by the heads
    losses, accuracies = [], []
    T = targets.shape[1]
    alive = prefix_gate.start(targets) if prefix_gate is not None else None
    for i, head in enumerate(heads.heads):
        j = i + 2
        if T <= j:
            break
        # Target t + j valid, and position t at or after the prompt's last token (where drafting starts).
        keep = (
            (valid[:, j:] & valid[:, 1 : T - j + 1])
            if valid is not None
            else torch.ones_like(targets[:, j:], dtype=torch.bool)
        )
        if not bool(keep.any()):
            continue
        next_embeds = None if embed is None else embed(targets[:, 1 : T - j + 1][keep])
        states = head(z[:, : T - j][keep], next_embeds)
        mix = {"teacher": z[:, j - 1 : T - 1][keep], "teacher_weight": teacher_weight} if teacher_weight else {}
        ranks: list = []
        if alive is not None:
            mix.update(row_weight=prefix_gate.row_weights(alive, keep), ranks=ranks)
        if candidates is None:
            loss, (top1,) = chunked_linear_ce(states, weight, targets[:, j:][keep], chunk=chunk, **mix)
        else:
            loss, (top1,) = candidate_linear_ce(
                states,
                weight,
                targets[:, j:][keep],
                columns,
                log_q,
                chunk=4 * chunk,
                weight_columns=weight_columns,
                **mix,
            )
        if alive is not None:
            prefix_gate.advance(alive, keep, torch.cat(ranks))
        losses.append(loss)
        accuracies.append(top1)
    if not losses:
        raise ValueError(f"sequences of {T} tokens are too short for heads up to {heads.horizon}")
    return torch.stack(losses).mean(), accuracies


def _own_continuations(model, chunks: Tensor, prompt_len: int, sample: bool = False) -> Tensor:
    prompt = chunks[:, :prompt_len]
    new = chunks.shape[1] - prompt_len
    # No EOS: the continuation runs to full length, an EOS being just another token.
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=new,
        do_sample=sample,
        eos_token_id=None,
        pad_token_id=0,
    )
    return out[:, : chunks.shape[1]]


def train_heads(
    model,
    data,
    *,
    heads: DraftHeads | None = None,
    horizon: int = 4,
    head_hidden: int | None = None,
    next_token: bool = False,
    tokenizer=None,
    steps: int = 1000,
    batch_size: int = 8,
    seq_len: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    targets: str = "data",
    prompt_len: int = 32,
    output_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int = 200,
    resume: bool = True,
    seed: int = 0,
    progress: bool | None = None,
    batch_tokens: int | None = None,
    warmup: int = 0,
    log_every: int = 50,
    time_budget: float | None = None,
    softmax: CandidateSoftmax | None = None,
    features: str | os.PathLike[str] | None = None,
    overwrite_features: bool = False,
    draft_vocab: int | None = None,
    teacher_weight: float = 0.0,
    prefix_gate: PrefixGate | None = None,
    feature_step=None,
) -> TrainResult:
    """Train draft heads of ``model`` (frozen) on ``data``; see the module docstring.

    Args:
        model: a transformers causal LM (its device is used; bf16 autocast on CUDA and CPU).
        data: a distilled corpus (a :class:`DistilledCorpus` or its folder: the heads learn the
            model's own continuations, from the prompt's last position on), text file(s) (with
            ``tokenizer``, default the model's folder) or token ids.
        heads: heads to continue training (default: new ``DraftHeads.for_model(model, horizon,
            head_hidden, next_token)`` in float32, or the checkpoint in ``output_dir`` when ``resume``).
        next_token: new heads also read the embedding of token t + 1 (the target's own choice,
            known when they draft): more accurate heads, one more output projection a step.
        targets: for text and ids, ``"data"`` (next-j corpus tokens), ``"greedy"`` or
            ``"sampled"`` (the model's continuation of each chunk's first ``prompt_len`` tokens).
        batch_size, seq_len: text and ids are cut into chunks of ``seq_len``, ``batch_size`` a step.
        batch_tokens: for a distilled corpus, tokens per step (default batch_size * seq_len);
            records longer than ``seq_len`` keep their first ``seq_len`` tokens.
        warmup: steps of linear learning-rate warm-up; the rate then decays (cosine) to lr / 10.
        time_budget: seconds of training for this call: after 10 timed steps, ``steps`` is cut
            to what fits (the schedule follows), so a run on unknown hardware ends on time.
        output_dir: where checkpoints and the final heads go (None: nothing written).
        progress: tqdm bar with loss and per-head accuracy (default: on a terminal); every
            ``log_every`` steps a log line gives the step, loss, accuracies, tokens/s and ETA.
        softmax: ``None`` for the full softmax over the vocabulary, or the options of the
            candidate-set softmax (:class:`CandidateSoftmax`; the logged accuracies are then
            among the candidates, an upper bound of the full-softmax figure).
        features: for a distilled corpus, a folder for the trunk's cached hidden states
            (:class:`FeatureCache`): built first when missing or unfinished (one trunk pass
            over the corpus, resumable, not counted in ``time_budget``), then read instead of
            running the trunk. ``overwrite_features`` rebuilds a cache of another model/corpus.
            ``feature_step``: a lean step of ``model`` (:class:`draftlattice.lean.LeanLlama`) computes
            them: the hidden states the heads read when they draft on that step.
        draft_vocab: restrict the trained heads to the ``draft_vocab`` most frequent target
            tokens (:meth:`DraftHeads.restrict_vocabulary`: a cheaper projection when decoding).
        teacher_weight: mix each head's target with the model's own next-token law there
            (0 = hard targets only; see :mod:`.head_loss`): trains the ranking below the top token,
            which a top-k lattice reads.
        prefix_gate: weigh each head's loss by whether the earlier heads' tokens were in their
            top k at the same position (:class:`PrefixGate`; None = plain cross-entropy): trains
            for the lattice's oracle rather than each head alone.

    Returns:
        :class:`TrainResult` with the trained heads (in eval mode, on the model's device).
    """
    if targets not in TARGETS:
        raise ValueError(f"targets must be one of {TARGETS}, got {targets!r}")
    check_teacher_weight(teacher_weight)
    if prefix_gate is not None and not isinstance(prefix_gate, PrefixGate):
        raise ValueError(f"prefix_gate must be a PrefixGate or None, got {prefix_gate!r}")
    if draft_vocab is not None and (
        isinstance(draft_vocab, bool) or not isinstance(draft_vocab, int) or draft_vocab < 1
    ):
        raise ValueError(f"draft_vocab must be a positive int, got {draft_vocab!r}")
    for name, value in (("steps", steps), ("batch_size", batch_size), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if feature_step is not None and features is None:
        raise ValueError("feature_step computes the cached features: it needs features= (and a distilled corpus)")
    lm_head = output_embeddings(model)
    device = lm_head.weight.device
    corpus = _as_corpus(data)
    if corpus is not None:
        if targets != "data":
            raise ValueError("a distilled corpus already holds the model's own continuations: use targets='data'")
        batches = RecordBatches(corpus, batch_tokens or batch_size * seq_len, seq_len, seed)
    else:
        if features is not None:
            raise ValueError("features (the trunk's cached hidden states) need a distilled corpus as data")
        if targets != "data" and not 0 < prompt_len < seq_len:
            raise ValueError(f"prompt_len must be in (0, seq_len={seq_len}) for {targets} targets, got {prompt_len}")
        ids = corpus_ids(data, model, tokenizer)
        if ids.numel() <= seq_len:
            raise ValueError(f"corpus has {ids.numel()} tokens, fewer than seq_len + 1 = {seq_len + 1}")
        batches = ChunkBatches(ids, batch_size, seq_len, seed)
    by_count = None  # target tokens, most frequent first: continuations of a corpus, or all of the ids
    if softmax is not None or draft_vocab is not None:
        if corpus is not None:
            counted = np.concatenate([corpus.record(r)[p:seq_len] for r, p in enumerate(corpus.prompt_lens.tolist())])
        else:
            counted = ids.numpy()
        counts = np.bincount(counted, minlength=lm_head.weight.shape[0])[: lm_head.weight.shape[0]]
        by_count = torch.from_numpy(np.argsort(-counts, kind="stable").copy())
    frequent = by_count[: softmax.frequent] if softmax is not None else None
    cache = None
    if features is not None:
        cache = FeatureCache.build(
            features,
            model,
            corpus,
            max_len=seq_len,
            batch_tokens=2 * (batch_tokens or batch_size * seq_len),
            overwrite=overwrite_features,
            progress=progress,
            step=feature_step,
        )
    out = Path(output_dir) if output_dir is not None else None
    state_path = out / STATE_NAME if out is not None else None
    start_step = 0
    state = None
    if resume and state_path is not None and state_path.is_file():
        heads = DraftHeads.from_pretrained(out, model, strict_name=False)
        state = torch.load(state_path, map_location="cpu", weights_only=False)
        start_step = int(state["step"])
        logger.info("resuming from %s at step %d", out, start_step)
    elif heads is None:
        heads = DraftHeads.for_model(model, horizon=horizon, head_hidden=head_hidden, next_token=next_token)
    heads = heads.to(device=device, dtype=torch.float32)  # fp32 master weights; bf16 compute
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    heads.train()
    optimizer = torch.optim.AdamW(heads.parameters(), lr=lr, weight_decay=weight_decay)
    plan = {"steps": steps}  # the schedule reads it; a time budget may lower it
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, warmup, plan["steps"]))
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state.get("schedule", {"last_epoch": start_step}))
        if "batches" in state:
            batches.set_state(state["batches"])
        else:  # a checkpoint from before the data order was saved
            batches.skip(start_step)
    result = TrainResult(heads, start_step)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    chunk = 8192 if device.type == "cuda" else 1024  # positions whose [chunk, V] logits exist at once
    from tqdm.auto import tqdm

    bar = tqdm(
        range(start_step, steps),
        initial=start_step,
        total=steps,
        desc="train-heads",
        disable=not (progress if progress is not None else sys.stderr.isatty()),
    )
    started, tokens_seen = time.monotonic(), 0
    for step in bar:
        if step >= plan["steps"]:
            break
        if cache is not None:
            rows = batches.next_rows()
            chunks, valid = batches.rows_batch(rows)
            z = cache.rows(rows, chunks.shape[1]).to(device)
            chunks, valid = chunks.to(device), valid.to(device)
        else:
            chunks, valid = batches.next()
            chunks, valid = chunks.to(device), valid.to(device)
            with torch.no_grad(), autocast:
                if targets != "data":
                    chunks = _own_continuations(model, chunks, prompt_len, sample=targets == "sampled")
                    valid = torch.zeros_like(valid)
                    valid[:, prompt_len:] = True
                z = model.base_model(input_ids=chunks).last_hidden_state
        candidates = None
        if softmax is not None:
            draw = torch.Generator().manual_seed(seed * 1_000_003 + step)  # the same draws on resume
            candidates = candidate_columns(chunks[valid], lm_head.weight.shape[0], frequent, softmax.negatives, draw)
        with autocast:
            loss, accuracies = head_losses(
                heads,
                model,
                z.detach(),
                chunks,
                valid,
                chunk=chunk,
                candidates=candidates,
                teacher_weight=teacher_weight,
                prefix_gate=prefix_gate,
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        tokens_seen += chunks.numel()
        loss_value = float(loss.detach())
        result.losses.append(loss_value)
        result.accuracies.append(accuracies)
        result.steps = step + 1
        if time_budget is not None and step + 1 == start_step + 10:  # before the log line, so its ETA is true
            per_step = (time.monotonic() - started) / 10
            plan["steps"] = min(steps, step + 1 + max(1, int((time_budget - 10 * per_step) / per_step)))
            logger.info(
                "time budget %.0f s at %.3f s a step: training to step %d", time_budget, per_step, plan["steps"]
            )
        bar.set_postfix(loss=f"{loss_value:.3f}", acc="/".join(f"{a:.2f}" for a in accuracies))
        if (step + 1) % log_every == 0 or step + 1 == plan["steps"]:  # for logs, where the bar is off
            elapsed = time.monotonic() - started
            logger.info(
                "step %d/%d loss %.4f top-1 per head%s %s | %.0f tokens/s, ETA %s",
                step + 1,
                plan["steps"],
                loss_value,
                " (among candidates)" if softmax is not None else "",
                " ".join(f"{a:.3f}" for a in accuracies),
                tokens_seen / max(elapsed, 1e-9),
                duration(elapsed / (step + 1 - start_step) * (plan["steps"] - step - 1)),
            )
        if out is not None and (step + 1) % checkpoint_every == 0 and step + 1 < plan["steps"]:
            _checkpoint(heads, optimizer, schedule, batches, step + 1, out)
    heads.eval()
    if draft_vocab is not None:
        heads.restrict_vocabulary(by_count[:draft_vocab])
        logger.info("draft vocabulary: the %d most frequent target tokens", min(draft_vocab, len(by_count)))
    if out is not None:
        _checkpoint(heads, optimizer, schedule, batches, result.steps, out)
    return result


def _lr_factor(step: int, warmup: int, steps: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _as_corpus(data) -> DistilledCorpus | None:
    if isinstance(data, DistilledCorpus):
        return data
    if isinstance(data, (str, os.PathLike)) and Path(data).is_dir():
        return DistilledCorpus.load(data)
    return None


def _checkpoint(heads: DraftHeads, optimizer, schedule, batches, step: int, out: Path) -> None:
    heads.save_pretrained(out)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "batches": batches.state(),
    }
    tmp = out / (STATE_NAME + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, out / STATE_NAME)
    logger.info("checkpoint at step %d in %s", step, out)
