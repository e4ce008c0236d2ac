"""Training of :class:`BlockwiseLM` with the joint blockwise loss (sum of per-head cross-entropies).

Random windows of ``seq_len + h`` tokens are drawn from the training stream; AdamW with linear
warm-up and cosine decay. Progress is ``max(step / max_steps, elapsed / time_budget)`` so that a
wall-clock budget ends the run with a fully decayed learning rate (with a time budget the run is
not bit-reproducible across machines; with steps only it is, for a fixed seed and device).
Periodically: evaluation on a validation subset and a checkpoint (a loadable model directory).
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .blockwise import BlockwiseLM
from .config import BlockwiseConfig
from .data import eos_id, eval_windows, token_stream
from .io import save_model
from .losses import blockwise_loss, blockwise_targets, evaluate_windows, sampled_blockwise_loss

logger = logging.getLogger(__name__)


@dataclass
class TrainOptions:
    """Optimisation settings; see the module docstring for the schedule."""

    seq_len: int = 256
    batch_size: int = 8
    max_steps: int = 2000
    time_budget_s: float | None = None
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    head_fraction: float = 1.0  # share of positions scoring heads 2..h (see losses.sampled_blockwise_loss)
    eval_every: int = 100
    eval_windows: int = 32
    seed: int = 1234
    threads: int | None = None
    device: str | None = None


def pick_device(requested: str | None) -> torch.device:
    if requested:
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def learning_rate(progress: float, step: int, options: TrainOptions) -> float:
    if step < options.warmup_steps:
        return options.lr * (step + 1) / options.warmup_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return options.lr * (options.min_lr_ratio + (1.0 - options.min_lr_ratio) * cosine)


def train(
    config: BlockwiseConfig,
    train_corpus,
    tokenizer_path,
    output_dir,
    valid_corpus=None,
    options: TrainOptions | None = None,
    cache_dir=None,
    show_progress: bool | None = None,
) -> dict:
    """Train a model from scratch and save it (and its checkpoints) to ``output_dir``.

    Returns the final summary (steps, tokens, seconds, last validation metrics), also written to
    ``output_dir/train_log.json``.
    """
    options = options or TrainOptions()
    if options.seq_len > config.max_seq_len:
        raise ValueError(f"seq_len {options.seq_len} exceeds max_seq_len {config.max_seq_len}")
    if not 0.0 < options.head_fraction <= 1.0:
        raise ValueError(f"head_fraction must be in (0, 1], got {options.head_fraction}")
    if options.batch_size <= 0 or options.max_steps <= 0 or options.seq_len <= 0:
        raise ValueError("seq_len, batch_size and max_steps must be positive")
    from tqdm.auto import tqdm

    from ..tokenizer import load_tokenizer

    show_progress = sys.stderr.isatty() if show_progress is None else show_progress
    if options.threads:
        torch.set_num_threads(options.threads)
    device = pick_device(options.device)
    seed_everything(options.seed)
    tokenizer = load_tokenizer(tokenizer_path)
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise ValueError(f"tokenizer vocab {tokenizer.get_vocab_size()} != config vocab_size {config.vocab_size}")
    config.eos_token_id = eos_id(tokenizer)
    stream = torch.from_numpy(token_stream(train_corpus, tokenizer_path, cache_dir).astype(np.int64))
    span = options.seq_len + config.num_heads
    if stream.numel() <= span:
        raise ValueError(f"training stream has {stream.numel()} tokens, fewer than one window ({span})")
    valid = None
    if valid_corpus is not None:
        valid = torch.from_numpy(
            eval_windows(
                token_stream(valid_corpus, tokenizer_path, cache_dir),
                options.seq_len,
                config.num_heads,
                options.eval_windows,
            )
        )
    logger.info("train stream %d tokens, device %s, threads %d", stream.numel(), device, torch.get_num_threads())

    model = BlockwiseLM(config).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": options.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=options.lr,
        betas=(0.9, 0.95),
    )
    generator = torch.Generator().manual_seed(options.seed)
    output_dir = Path(output_dir)
    history: list[dict] = []
    start_time = time.monotonic()
    step, tokens = 0, 0
    bar = tqdm(total=options.max_steps, disable=not show_progress, desc="train", dynamic_ncols=True)

    def evaluate_and_save(final: bool) -> dict:
        record = {"step": step, "tokens": tokens, "seconds": round(time.monotonic() - start_time, 1)}
        if valid is not None:
            metrics = evaluate_windows(model, valid, device=device)
            record.update(valid_perplexity=metrics["perplexity"], valid_head_accuracy=metrics["head_accuracy"])
            logger.info(
                "step %d: valid ppl %.2f, head acc %s",
                step,
                metrics["perplexity"],
                " ".join(f"{a:.3f}" for a in metrics["head_accuracy"]),
            )
            bar.write(
                f"step {step}: valid ppl {metrics['perplexity']:.2f} head top-1 "
                + " ".join(f"{a:.3f}" for a in metrics["head_accuracy"])
            ) if show_progress else None
        history.append(record)
        save_model(model, output_dir if final else output_dir / "checkpoint", tokenizer_path=tokenizer_path)
        (output_dir / "train_log.json").write_text(json.dumps({"history": history}, indent=1) + "\n")
        model.train()
        return record

    output_dir.mkdir(parents=True, exist_ok=True)
    model.train()
    while True:
        elapsed = time.monotonic() - start_time
        progress = step / options.max_steps
        if options.time_budget_s:
            progress = max(progress, elapsed / options.time_budget_s)
        if progress >= 1.0:
            break
        lr = learning_rate(progress, step, options)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, stream.numel() - span + 1, (options.batch_size,), generator=generator)
        window = torch.stack([stream[s : s + span] for s in starts.tolist()]).to(device)
        inputs, targets = blockwise_targets(window, config.num_heads)
        if options.head_fraction >= 1.0:
            loss, per_head = blockwise_loss(model(inputs).logits, targets)
        else:
            loss, per_head = sampled_blockwise_loss(model, inputs, targets, options.head_fraction, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), options.grad_clip)
        optimizer.step()
        step += 1
        tokens += inputs.numel()
        bar.update(1)
        bar.set_postfix(loss=f"{per_head[0].item():.3f}", lr=f"{lr:.2e}")
        if step % 10 == 0:
            logger.info(
                "step %d lr %.2e head-1 loss %.3f total %.3f %.0f tok/s",
                step,
                lr,
                per_head[0].item(),
                loss.item(),
                tokens / (time.monotonic() - start_time),
            )
        if step % options.eval_every == 0:
            evaluate_and_save(final=False)
    bar.close()
    record = evaluate_and_save(final=True)
    logger.info("done: %d steps, %d tokens, %.0f s", step, tokens, record["seconds"])
    return record
