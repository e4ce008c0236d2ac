"""Recipe: fine-tune draft heads on the default model's answers sampled at one temperature
(resumable, CPU or CUDA).

    python lm_models/recipe/sampled_heads.py --work build/heads-t07 --temperature 0.7 \\
        --init-heads lm_models/smollm2/heads-sampled --first 20000 [--out DIR]

Heads trained on greedy answers (or on answers sampled at another temperature) accept less often
when the target samples at T: what a head should predict is the model's sampled continuation,
which depends on T. Stages, each resumed when rerun with the same arguments:

1. held-out answers sampled at each ``--heldout-temperatures`` to the held-out prompts
   (``--heldout-prompts``, or 192 drawn from WikiText-2 raw *valid* as smollm2_heads.py does);
2. self-distillation: the answers to ``--prompts`` training prompts (from ``--first`` on in
   ``--prompts-file``, or in the prompts smollm2_heads.py draws from the enwiki sample, the same
   list) sampled at ``--temperature`` into ``distill-T/`` (``--distill-seconds`` budget);
3. the initial heads' held-out top-1/4/8 accuracy per head;
4. training from ``--init-heads`` on ``distill-T/`` (checkpoints in ``heads-T/``,
   ``--train-seconds`` budget; on a CPU ``--candidate-softmax`` and ``--cache-features`` make
   a step several times cheaper);
5. the trained heads' held-out accuracy, beside the initial heads' in ``accuracy-T.json``; the
   heads are written (bf16) to ``--out``.

Progress and ETAs go to stderr and ``WORK/recipe.log``. Uses CUDA when there is a GPU.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import recipe_setup
import torch

logger = logging.getLogger("sampled_heads")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="working folder (data, checkpoints, log)")
    p.add_argument("--temperature", type=float, required=True, help="sampling temperature of the training answers")
    p.add_argument("--init-heads", type=Path, required=True, help="the heads to start from (a DraftHeads folder)")
    p.add_argument("--prompts-file", type=Path, help="JSON list of [kind, text] (.json or .json.xz)")
    p.add_argument("--first", type=int, default=0, help="index of the first training prompt in the file")
    p.add_argument("--prompts", type=int, default=20000, help="training prompts")
    p.add_argument("--heldout-prompts", type=Path, help="JSON list of [kind, text] held-out prompts")
    p.add_argument(
        "--heldout-temperatures", type=float, nargs="+", help="temperatures of the held-out answers (default: T)"
    )
    p.add_argument("--out", type=Path, help="where to write the trained heads (bf16)")
    p.add_argument("--model", type=Path, help="transformers folder (default: the fetched default model)")
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data folder")
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--gen-batch", type=int, default=64, help="prompts per generate() call")
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=50, help="learning-rate warm-up steps")
    p.add_argument("--draft-vocab", type=int, default=16384, help="the N most frequent target tokens")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--candidate-softmax", action="store_true", help="train through the candidate-set softmax")
    p.add_argument("--cache-features", action="store_true", help="cache the trunk's hidden states in WORK")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--distill-seconds", type=float, help="time budget of the distillation (rerun to continue)")
    p.add_argument("--train-seconds", type=float, help="time budget of the training (rerun to continue)")
    return p.parse_args(argv)


def training_and_heldout_prompts(args):
    """The prompts of the files given, else those smollm2_heads.py draws (the same seeds)."""
    training = recipe_setup.training_prompts(args.prompts_file, args.data, args.first + args.prompts)[args.first :]
    heldout = (
        recipe_setup.read_prompts(args.heldout_prompts)
        if args.heldout_prompts
        else recipe_setup.heldout_prompts(args.data)
    )
    return training, heldout


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.temperature <= 0:
        raise SystemExit("--temperature must be > 0 (greedy heads: smollm2_heads.py)")
    device = recipe_setup.start(args.work, args.threads, None)
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf.heads import DraftHeads
    from draftlattice.training.distill import distill
    from draftlattice.training.head_accuracy import head_accuracy
    from draftlattice.training.head_loss import CandidateSoftmax
    from draftlattice.training.trainer import train_heads

    tokenizer, model = recipe_setup.load_model(args.model, device)
    prompts, heldout = training_and_heldout_prompts(args)
    tag = f"t{args.temperature:g}"
    common = dict(batch_size=args.gen_batch, max_new_tokens=args.max_new_tokens, shard_size=args.gen_batch * 2)

    heldout_sets = {}
    for t in args.heldout_temperatures or [args.temperature]:
        folder_t = distill(model, tokenizer, heldout, args.work / f"heldout-t{t:g}", temperature=t, **common)
        heldout_sets[f"t{t:g}"] = DistilledCorpus.load(folder_t)
    started = time.monotonic()
    deadline = started + args.distill_seconds if args.distill_seconds else None
    data = distill(
        model,
        tokenizer,
        prompts,
        args.work / f"distill-{tag}",
        temperature=args.temperature,
        deadline=deadline,
        **common,
    )
    logger.info("distillation: %.0f s this run", time.monotonic() - started)

    init = DraftHeads.from_pretrained(args.init_heads, model, strict_name=False).to(device)
    report = {f"init on {name}": head_accuracy(model, init, c) for name, c in heldout_sets.items()}
    trained = train_heads(
        model,
        data,
        heads=init,
        steps=args.steps,
        batch_tokens=args.batch_tokens,
        seq_len=1024,
        lr=args.lr,
        warmup=args.warmup,
        checkpoint_every=args.checkpoint_every,
        log_every=25,
        progress=False,
        time_budget=args.train_seconds,
        softmax=CandidateSoftmax() if args.candidate_softmax else None,
        features=args.work / f"features-{tag}" if args.cache_features else None,
        draft_vocab=args.draft_vocab,
        output_dir=args.work / f"heads-{tag}",
    ).heads
    report.update({f"trained on {name}": head_accuracy(model, trained, c) for name, c in heldout_sets.items()})
    recipe_setup.write_accuracy(report, args.work / f"accuracy-{tag}.json")
    if args.out:
        trained.to(torch.bfloat16).save_pretrained(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
