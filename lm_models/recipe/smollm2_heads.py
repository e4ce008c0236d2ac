"""Recipe: draft heads for SmolLM2-135M-Instruct by self-distillation (resumable, CPU or CUDA).

    python lm_models/recipe/smollm2_heads.py --work build/smollm2-heads [--out lm_models/smollm2]

Stages, each skipped when its output is complete (rerun the same command to resume):

1. the model: the fetched default (``draftlattice model fetch``) or ``--model DIR``;
2. prompts: ``--prompts`` chat questions and text openings drawn from the enwiki sample
   (``--prompts-file`` reads a JSON list of ``[kind, text]`` instead), and ``--heldout``
   prompts from WikiText-2 raw *valid* (never seen in training);
3. self-distillation: the model's greedy answers (``distill-greedy/``) and, with
   ``--sampled-prompts``, its answers sampled at T = 1 (``distill-sampled/``);
4. training (checkpointed every ``--checkpoint-every`` steps) of the greedy heads, and of the
   sampling heads (initialised from the greedy ones) on the sampled data; on a CPU,
   ``--candidate-softmax`` (a sampled softmax for the loss) and ``--cache-features`` (the trunk's
   hidden states computed once into ``features-greedy/`` and ``features-sampled/`` (by the lean
   step with ``--lean``: the states the heads read on it), about 1.15 KB
   a token, then read back; a stage of their own, ``--stop-after features``, and extended in
   place when the corpus grows) make a step several times cheaper (bench/RESULTS.md);
5. held-out top-1/4/8 accuracy per head (``accuracy-*.json``); the heads are written (bf16)
   to ``--out`` as ``heads/`` and ``heads-sampled/``, and the greedy answers as the retrieval
   datastore ``datastore.npz`` (``draftlattice.Datastore``).

Progress and ETAs go to stderr and ``WORK/recipe.log``. Uses CUDA when there is a GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import recipe_setup
import torch

logger = logging.getLogger("smollm2_heads")
SEQ_LEN = 1024  #: the longest record the heads learn from (tokens)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="working folder (data, checkpoints, log)")
    p.add_argument("--out", type=Path, help="where to write heads/ and heads-sampled/ (bf16)")
    p.add_argument("--model", type=Path, help="transformers folder (default: the fetched default model)")
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data folder")
    p.add_argument("--prompts-file", type=Path, help="JSON list of [kind, text] training prompts (.json or .json.xz)")
    p.add_argument("--prompts", type=int, default=6000, help="greedy training prompts")
    p.add_argument("--sampled-prompts", type=int, default=0, help="prompts answered by sampling at T = 1")
    p.add_argument("--heldout", type=int, default=192, help="held-out prompts (WikiText-2 raw valid)")
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--gen-batch", type=int, default=64, help="prompts per generate() call")
    p.add_argument("--horizon", type=int, default=4)
    p.add_argument("--head-hidden", type=int, default=1536)
    p.add_argument("--next-token", action="store_true", help="heads that also read token t+1's embedding")
    p.add_argument("--draft-vocab", type=int, help="restrict the heads to the N most frequent target tokens")
    p.add_argument("--steps", type=int, default=3000, help="training steps of the greedy heads")
    p.add_argument("--sampled-steps", type=int, default=1000, help="further steps on sampled data")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument(
        "--init-heads",
        type=Path,
        help="start the greedy heads from these (a DraftHeads folder; a shorter horizon gains new heads, a narrower head_hidden new units)",
    )
    p.add_argument("--warmup", type=int, default=100, help="learning-rate warm-up steps")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--candidate-softmax", action="store_true", help="train through the candidate-set softmax")
    p.add_argument("--frequent", type=int, default=2048, help="candidate softmax: always-candidate tokens")
    p.add_argument("--negatives", type=int, default=1024, help="candidate softmax: uniform negatives a step")
    p.add_argument("--cache-features", action="store_true", help="cache the trunk's hidden states in WORK")
    p.add_argument(
        "--teacher-weight",
        type=float,
        default=0.0,
        help="mix each head's target with the model's own next-token law (0..1; 0 = hard targets)",
    )
    p.add_argument(
        "--prefix-gate",
        type=int,
        metavar="K",
        help="weigh each head's loss by whether the earlier heads had their tokens in their top K there "
        "(trains for the lattice's oracle; default: plain cross-entropy)",
    )
    p.add_argument(
        "--prefix-gate-weight", type=float, default=1.0, help="with --prefix-gate: the gated share of each loss (0..1)"
    )
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    p.add_argument(
        "--lean",
        choices=["int4", "int8", "dense"],
        help="distill the greedy answers with the lean step in this weight format (CPU: several times faster "
        "than generate(); the answers of the model the demo's drafted rows verify against), and with "
        "--cache-features compute the trunk's features with it (the states the heads read on that step)",
    )
    p.add_argument("--distill-seconds", type=float, help="time budget of the distillation (rerun to continue)")
    p.add_argument(
        "--train-seconds", type=float, help="time budget of the greedy heads' training (the sampled heads: half)"
    )
    p.add_argument(
        "--stop-after",
        choices=["distill", "features", "train"],
        help="stop after this stage (features: the trunk's cached states, with --cache-features)",
    )
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    device = recipe_setup.start(args.work, args.threads, args.device)
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf.heads import DraftHeads
    from draftlattice.training.distill import distill
    from draftlattice.training.head_accuracy import head_accuracy
    from draftlattice.training.head_loss import CandidateSoftmax
    from draftlattice.training.prefix_gate import PrefixGate
    from draftlattice.training.trainer import train_heads

    tokenizer, model = recipe_setup.load_model(args.model, device)

    train_prompts = recipe_setup.training_prompts(args.prompts_file, args.data, args.prompts + args.sampled_prompts)
    greedy_prompts = train_prompts[: args.prompts]
    sampled_prompts = train_prompts[args.prompts : args.prompts + args.sampled_prompts]
    heldout_file = args.work / "heldout-prompts.json"
    if heldout_file.is_file():
        heldout = recipe_setup.read_prompts(heldout_file)
    else:
        heldout = recipe_setup.heldout_prompts(args.data, args.heldout)
        heldout_file.write_text(json.dumps([[p.kind, p.text] for p in heldout]))

    common = dict(batch_size=args.gen_batch, max_new_tokens=args.max_new_tokens, shard_size=args.gen_batch * 2)
    greedy = dict(common)
    if args.lean:
        from draftlattice.lean import LeanLlama

        greedy["step"] = LeanLlama(model, args.lean)
    started = time.monotonic()
    budget = args.distill_seconds
    share = args.prompts / max(1, args.prompts + args.sampled_prompts)
    distill(model, tokenizer, heldout, args.work / "heldout-greedy", **greedy)
    if sampled_prompts:
        distill(model, tokenizer, heldout, args.work / "heldout-sampled", temperature=1.0, **common)
    deadline = started + budget * share if budget else None
    distill(model, tokenizer, greedy_prompts, args.work / "distill-greedy", deadline=deadline, **greedy)
    if sampled_prompts:
        deadline = started + budget if budget else None
        distill(
            model,
            tokenizer,
            sampled_prompts,
            args.work / "distill-sampled",
            temperature=1.0,
            deadline=deadline,
            **common,
        )
    logger.info("distillation done in %.0f s", time.monotonic() - started)
    if args.stop_after == "distill":
        return 0
    if args.cache_features:  # its own stage: the longest pass over the data, resumable on its own
        from draftlattice.training.feature_cache import FeatureCache

        FeatureCache.build(
            args.work / "features-greedy",
            model,
            DistilledCorpus.load(args.work / "distill-greedy"),
            max_len=SEQ_LEN,
            batch_tokens=2 * args.batch_tokens,  # as train_heads builds it
            progress=False,
            step=greedy.get("step"),
        )
    if args.stop_after == "features":
        return 0

    train = dict(
        batch_tokens=args.batch_tokens,
        seq_len=SEQ_LEN,
        lr=args.lr,
        checkpoint_every=args.checkpoint_every,
        warmup=min(args.warmup, args.steps // 10),
        log_every=25,
        progress=False,
        time_budget=args.train_seconds,
        softmax=CandidateSoftmax(args.frequent, args.negatives) if args.candidate_softmax else None,
        draft_vocab=args.draft_vocab,
        teacher_weight=args.teacher_weight,
        prefix_gate=PrefixGate(args.prefix_gate, args.prefix_gate_weight) if args.prefix_gate else None,
        feature_step=greedy.get("step") if args.cache_features else None,
    )
    init = DraftHeads.from_pretrained(args.init_heads, model, strict_name=False) if args.init_heads else None
    if init is not None and init.horizon < args.horizon:  # trained heads, and new ones beyond them
        init = init.extended(args.horizon)
    if init is not None and init.head_hidden < args.head_hidden:  # trained units, and new silent ones
        init = init.widened(args.head_hidden)
    greedy = train_heads(
        model,
        args.work / "distill-greedy",
        heads=init,
        horizon=args.horizon,
        head_hidden=args.head_hidden,
        next_token=args.next_token,
        steps=args.steps,
        output_dir=args.work / "heads-greedy",
        features=args.work / "features-greedy" if args.cache_features else None,
        **train,
    ).heads
    report = {"greedy": head_accuracy(model, greedy, DistilledCorpus.load(args.work / "heldout-greedy"))}
    sampled = None
    if sampled_prompts:
        start = DraftHeads.from_pretrained(args.work / "heads-greedy", model, strict_name=False)
        sampled = train_heads(
            model,
            args.work / "distill-sampled",
            heads=start,
            steps=args.sampled_steps,
            output_dir=args.work / "heads-sampled",
            features=args.work / "features-sampled" if args.cache_features else None,
            **{**train, "time_budget": args.train_seconds / 2 if args.train_seconds else None},
        ).heads
        report["sampled"] = head_accuracy(model, sampled, DistilledCorpus.load(args.work / "heldout-sampled"))
        report["greedy_on_sampled"] = head_accuracy(model, greedy, DistilledCorpus.load(args.work / "heldout-sampled"))
    recipe_setup.write_accuracy(report, args.work / "accuracy.json")
    if args.out:
        from draftlattice.datastore import Datastore

        for heads, name in ((greedy, "heads"), (sampled, "heads-sampled")):
            if heads is not None:
                heads.to(torch.bfloat16).save_pretrained(args.out / name)
                heads.float()
        Datastore.from_corpora([args.work / "distill-greedy"]).save(args.out / "datastore.npz", overwrite=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
