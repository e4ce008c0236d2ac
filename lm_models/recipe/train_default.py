"""Train the default target: a small Llama with h blockwise heads, trunk and heads jointly.

The paper's regime (Stern et al. 2018; Kim et al. 2024) trains the h heads together with the
trunk. Here the trunk is a ``transformers`` ``LlamaForCausalLM`` (so the default model takes
exactly the path a user's own model takes: ``draftlattice.hf``), and heads 2..h are residual
feed-forward heads on its final hidden state that share its output projection, saved in the
``draftlattice.hf.DraftHeads`` folder format.

Objective: head 1's cross-entropy at every position plus ``head_weight`` times each other head's
cross-entropy on a random ``head_fraction`` of the positions (an unbiased estimate that cuts the
h x V output projection, the dominant cost of a small model). AdamW, linear warm-up, cosine decay
over ``--steps``; the schedule is a function of the step alone, so a run stopped anywhere and
resumed from its checkpoint continues exactly (data order and dropout-free model included).

Runs on CUDA (bf16 autocast) when present, else on the CPU. Progress goes to the log (one line
per ``--log-every`` steps: loss, tokens/s, ETA) and every ``--eval-every`` steps the validation
perplexity and per-head top-1 accuracy; a checkpoint is written at each evaluation and on
SIGTERM/SIGINT. ``--export DIR`` writes the finished model (transformers folder ``DIR/model``
with the tokenizer, heads folder ``DIR/heads``, weights in fp16) and the training curve.

usage: python lm_models/recipe/train_default.py --work WORK_DIR [--steps N] [--export DIR]
(WORK_DIR holds data/train.txt, tokenizer.json from build_model.sh; see --help)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from draftlattice.model.data import eval_windows, token_stream
from draftlattice.model.heads import ResidualHead

logger = logging.getLogger("train_default")


def llama_config(vocab_size: int, args) -> transformers.LlamaConfig:  # noqa: F821
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=args.width,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.width // 64,
        num_key_value_heads=args.width // 64,
        max_position_embeddings=args.max_positions,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


class JointModel(nn.Module):
    """Trunk + heads 2..h; ``heads.{i}`` parameters named as in the DraftHeads folder format."""

    def __init__(self, base: nn.Module, horizon: int, head_hidden: int) -> None:
        super().__init__()
        self.base = base
        width = base.config.hidden_size
        self.heads = nn.ModuleList(ResidualHead(width, head_hidden) for _ in range(horizon - 1))

    def losses(self, window: torch.Tensor, head_fraction: float, generator: torch.Generator):
        """Per-head cross-entropy [h] on windows [B, L + h] (head j at t predicts t + j)."""
        h = len(self.heads) + 1
        L = window.shape[1] - h
        z = self.base.model(input_ids=window[:, :L]).last_hidden_state  # [B, L, d], final norm applied
        project = self.base.get_output_embeddings()
        losses = [F.cross_entropy(project(z).float().flatten(0, 1), window[:, 1 : 1 + L].flatten())]
        flat = z.flatten(0, 1)
        keep = max(1, int(round(head_fraction * flat.shape[0])))
        index = torch.randperm(flat.shape[0], generator=generator)[:keep].to(z.device)
        for j, head in enumerate(self.heads, start=2):
            targets = window[:, j : j + L].flatten()[index]
            losses.append(F.cross_entropy(project(head(flat[index])).float(), targets))
        return torch.stack(losses)

    @torch.no_grad()
    def evaluate(self, windows: torch.Tensor, batch: int = 16) -> dict:
        """Head-1 perplexity and per-head top-1 accuracy over every position of ``windows``."""
        h = len(self.heads) + 1
        nll, correct, count = 0.0, torch.zeros(h, dtype=torch.float64), 0
        self.eval()
        for start in range(0, windows.shape[0], batch):
            window = windows[start : start + batch]
            L = window.shape[1] - h
            z = self.base.model(input_ids=window[:, :L]).last_hidden_state
            project = self.base.get_output_embeddings()
            for j in range(h):
                logits = project(z if j == 0 else self.heads[j - 1](z)).float()
                targets = window[:, 1 + j : 1 + j + L]
                if j == 0:
                    nll += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
                correct[j] += (logits.argmax(-1) == targets).sum().item()
            count += window.shape[0] * L
        self.train()
        return {"valid_ppl": math.exp(nll / count), "head_accuracy": (correct / count).tolist(), "tokens": count}


def learning_rate(step: int, args) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def save_checkpoint(path: Path, model, optimizer, step, generator, history) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "generator": generator.get_state(),
            "history": history,
        },
        tmp,
    )
    tmp.replace(path)  # an interrupted write never replaces the previous checkpoint


def export(model: JointModel, tokenizer_path: Path, out: Path, history: list, args) -> None:
    """The model folder (transformers, fp16, tokenizer) and the heads folder (DraftHeads format)."""
    from safetensors.torch import save_file
    from transformers import PreTrainedTokenizerFast

    base = model.base
    (out / "model").mkdir(parents=True, exist_ok=True)
    base.to(torch.float16).save_pretrained(out / "model")
    base.to(torch.float32)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tokenizer_path),
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
    )
    tokenizer.save_pretrained(out / "model")
    # save_pretrained re-serialises tokenizer.json; keep the original bytes, whose sha256 the
    # n-gram LMs record (draftlattice.pairing).
    shutil.copyfile(tokenizer_path, out / "model" / "tokenizer.json")
    heads_dir = out / "heads"
    heads_dir.mkdir(parents=True, exist_ok=True)
    state = {f"heads.{k}": v.detach().to(torch.float16).contiguous() for k, v in model.heads.state_dict().items()}
    save_file(state, heads_dir / "model.safetensors")
    config = {
        "format": "draftlattice-draft-heads",
        "version": 1,
        "horizon": len(model.heads) + 1,
        "hidden_size": base.config.hidden_size,
        "head_hidden": args.head_hidden,
        "vocab_size": base.config.vocab_size,
        "activation": "gelu",
        "base_model_type": base.config.model_type,
        "base_model_name": "model",
    }  # the folder beside heads/
    (heads_dir / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (out / "train_log.json").write_text(
        json.dumps({"args": vars(args), "history": history}, indent=1, default=str) + "\n"
    )
    plot_curve(history, out / "training_curve.png")


def plot_curve(history: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = [r for r in history if "valid_ppl" in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot([r["tokens"] / 1e6 for r in evals], [r["valid_ppl"] for r in evals], marker="o")
    left.set(xlabel="training tokens (M)", ylabel="WikiText-2 valid perplexity (head 1)", yscale="log")
    for j in range(len(evals[0]["head_accuracy"]) if evals else 0):
        right.plot([r["tokens"] / 1e6 for r in evals], [r["head_accuracy"][j] for r in evals], label=f"head {j + 1}")
    right.set(xlabel="training tokens (M)", ylabel="top-1 accuracy (valid)")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="work folder (data/, tokenizer.json, checkpoint)")
    parser.add_argument("--valid", type=Path, default=Path("../shared/data/wikitext-2/valid.txt"))
    parser.add_argument("--export", type=Path, help="write the finished model here (after the last step)")
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=768)
    parser.add_argument("--horizon", type=int, default=8, help="h: heads including the model's own")
    parser.add_argument("--head-hidden", type=int, default=256)
    parser.add_argument("--head-weight", type=float, default=0.1, help="loss weight of each head 2..h")
    parser.add_argument("--head-fraction", type=float, default=0.25)
    parser.add_argument("--max-positions", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--min-lr-ratio", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-windows", type=int, default=48)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch's default)")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)

    from transformers import LlamaForCausalLM

    from draftlattice.tokenizer import load_tokenizer

    tokenizer_path = args.work / "tokenizer.json"
    vocab_size = load_tokenizer(tokenizer_path).get_vocab_size()
    stream = torch.from_numpy(
        token_stream(args.work / "data" / "train.txt", tokenizer_path, args.work / "cache").astype(np.int64)
    )
    valid = torch.from_numpy(
        eval_windows(
            token_stream(args.valid, tokenizer_path, args.work / "cache"), args.seq_len, args.horizon, args.eval_windows
        )
    ).to(device)
    logger.info(
        "train stream %d tokens, vocab %d, device %s, %d threads",
        stream.numel(),
        vocab_size,
        device,
        torch.get_num_threads(),
    )

    model = JointModel(LlamaForCausalLM(llama_config(vocab_size, args)), args.horizon, args.head_hidden).to(device)
    logger.info(
        "parameters: trunk %.2fM, heads %.2fM",
        sum(p.numel() for p in model.base.parameters()) / 1e6,
        sum(p.numel() for p in model.heads.parameters()) / 1e6,
    )
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    generator = torch.Generator().manual_seed(args.seed)
    checkpoint = args.work / "checkpoint.pt"
    step, history = 0, []
    if checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        step, history = state["step"], state["history"]
        logger.info("resumed at step %d", step)

    stop = {"now": False}

    def request_stop(signum, frame) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    span = args.seq_len + args.horizon
    tokens_per_step = args.batch * args.seq_len
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)
    )
    model.train()
    started, start_step = time.monotonic(), step
    while step < args.steps and not stop["now"]:
        lr = learning_rate(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, stream.numel() - span + 1, (args.batch,), generator=generator)
        window = torch.stack([stream[s : s + span] for s in starts.tolist()]).to(device)
        with autocast:
            per_head = model.losses(window, args.head_fraction, generator)
        loss = per_head[0] + args.head_weight * per_head[1:].sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % args.log_every == 0:
            rate = (step - start_step) * tokens_per_step / (time.monotonic() - started)
            eta_h = (args.steps - step) * tokens_per_step / rate / 3600
            logger.info(
                "step %d/%d lr %.2e head-1 %.3f heads %s | %.0f tok/s, ETA %.1f h",
                step,
                args.steps,
                lr,
                per_head[0].item(),
                " ".join(f"{x:.2f}" for x in per_head[1:].tolist()),
                rate,
                eta_h,
            )
        if step % args.eval_every == 0 or step == args.steps:
            record = {"step": step, "tokens": step * tokens_per_step, **model.evaluate(valid)}
            history.append(record)
            logger.info(
                "eval step %d: valid ppl %.2f, head top-1 %s",
                step,
                record["valid_ppl"],
                " ".join(f"{a:.3f}" for a in record["head_accuracy"]),
            )
            save_checkpoint(checkpoint, model, optimizer, step, generator, history)
    save_checkpoint(checkpoint, model, optimizer, step, generator, history)
    if stop["now"]:
        logger.info("stopped at step %d; run the same command to resume", step)
    elif args.export:
        export(model.to("cpu").float(), tokenizer_path, args.export, history, args)
        logger.info("exported to %s", args.export)


if __name__ == "__main__":
    main()
