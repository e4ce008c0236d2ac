"""`draftlattice hf ...`: draft heads for Hugging Face transformers models.

``draftlattice hf train-heads MODEL_DIR --data corpus.txt --horizon 4 -o my-heads/`` trains
heads 2..h of a local transformers causal LM (frozen) and writes them in the DraftHeads format.
On a CPU, ``--candidate-softmax`` (a sampled softmax for the loss) and, for a distilled corpus,
``--features DIR`` (the trunk's hidden states cached once) make a step several times cheaper.
``draftlattice hf datastore CORPUS... -o datastore.npz`` collects a model's distilled answers
for retrieval drafts (``draftlattice.Datastore``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._output import check_output


def register(subparsers) -> None:
    group = subparsers.add_parser("hf", help="draft heads for Hugging Face transformers models")
    commands = group.add_subparsers(dest="hf_command", metavar="COMMAND")
    p = commands.add_parser(
        "train-heads",
        help="train draft heads of a transformers causal LM (base model frozen)",
        description="Train heads 2..h on the frozen model's final hidden state, sharing its output "
        "projection. Resumes from a checkpoint in OUTPUT unless --no-resume.",
    )
    p.add_argument("model", type=Path, help="local transformers model folder (AutoModelForCausalLM)")
    p.add_argument(
        "--data",
        type=Path,
        nargs="+",
        required=True,
        help="text corpus, one document per line; or one distilled corpus folder (the model's own "
        "answers as token ids, lm_models/recipe/smollm2_heads.py), trained from each prompt's end on",
    )
    p.add_argument(
        "--batch-tokens", type=int, help="tokens per step for a distilled corpus (default batch-size x seq-len)"
    )
    p.add_argument("--tokenizer", type=Path, help="tokenizer folder or tokenizer.json (default: MODEL)")
    p.add_argument(
        "--horizon",
        type=int,
        help="h: heads 2..h are trained (default 4, or --init-heads' own; above theirs, new heads join them)",
    )
    p.add_argument("--head-hidden", type=int, help="hidden width of the heads (default: model hidden size)")
    p.add_argument(
        "--next-token",
        action="store_true",
        help="new heads also read the embedding of token t+1 (the target's own choice, known when they "
        "draft): more accurate, one more output projection a decoding step",
    )
    p.add_argument("-o", "--output", type=Path, required=True, help="heads folder to write")
    p.add_argument(
        "--targets",
        choices=["data", "greedy", "sampled"],
        default="data",
        help="data: corpus next-j tokens; greedy / sampled: the model's own continuations "
        "of each chunk's first --prompt-len tokens (self-distillation)",
    )
    p.add_argument("--prompt-len", type=int, default=32, help="prompt tokens per chunk for --targets greedy/sampled")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument(
        "--draft-vocab",
        type=int,
        help="restrict the trained heads to the N most frequent target tokens (a cheaper projection when "
        "decoding; tokens outside are never drafted)",
    )
    p.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up (then cosine decay)")
    p.add_argument(
        "--init-heads",
        type=Path,
        help="start from these heads (a DraftHeads folder; e.g. greedy heads fine-tuned on sampled answers) "
        "instead of new ones; a checkpoint in OUTPUT still takes precedence unless --no-resume",
    )
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--no-resume", action="store_true", help="start over even if OUTPUT holds a checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--candidate-softmax",
        action="store_true",
        help="train through a candidate-set softmax (the step's targets, the --frequent most frequent tokens, "
        "--negatives sampled ones, log-Q corrected) instead of the full vocabulary: several times faster on a CPU",
    )
    p.add_argument("--frequent", type=int, default=2048, help="candidate softmax: always-candidate tokens (2048)")
    p.add_argument("--negatives", type=int, default=1024, help="candidate softmax: uniform negatives a step (1024)")
    p.add_argument(
        "--features",
        type=Path,
        help="distilled corpus only: folder of the frozen trunk's cached hidden states (bf16, 1.15 KB a token "
        "for hidden size 576), built first (resumable; a grown corpus extends it), then read instead of running "
        "the trunk",
    )
    p.add_argument(
        "--overwrite-features", action="store_true", help="rebuild a --features cache of another model or corpus"
    )
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="model dtype (the frozen forward and the heads run under bf16 autocast, on CPU and CUDA)",
    )
    p.set_defaults(func=run_train_heads)
    p = commands.add_parser(
        "datastore",
        help="a datastore of a model's own answers, for retrieval drafts (generate(draft_datastore=))",
        description="Collect the answers (prompts left out) of distilled corpora (folders written by "
        "the heads recipe's distillation) into one datastore file (.npz) that "
        "draftlattice.Datastore.load reads.",
    )
    p.add_argument("corpora", type=Path, nargs="+", help="distilled corpus folders")
    p.add_argument("-o", "--output", type=Path, required=True, help="datastore file to write (.npz)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.set_defaults(func=run_datastore)
    group.set_defaults(func=lambda args: group.print_help() or 2)


def run_datastore(args: argparse.Namespace) -> int:
    from ..datastore import Datastore

    for folder in args.corpora:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such distilled corpus folder")
        if args.output.resolve().is_relative_to(folder.resolve()):
            raise ValueError(f"-o {args.output}: inside the distilled corpus {folder}, which it reads; write elsewhere")
    check_output(args.output, force=args.force, expect="file", described="a datastore file")
    store = Datastore.from_corpora(args.corpora)
    store.save(args.output, overwrite=args.force)
    print(f"wrote {args.output}: {store.num_tokens} tokens in {store.num_records} answers")
    return 0


def _check_arguments(args: argparse.Namespace) -> None:
    """Every argument, before the model is loaded or anything written."""
    from ..training.trainer import STATE_NAME
    from ._checks import at_least, finite

    if not (args.model / "config.json").is_file():
        raise ValueError(f"{args.model}: not a transformers model folder (no config.json)")
    for path in args.data:
        if not path.exists():
            raise FileNotFoundError(f"--data {path}: no such file or folder")
    for option, path in (("--tokenizer", args.tokenizer), ("--init-heads", args.init_heads)):
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{option} {path}: no such file or folder")
    if args.output.exists() and not args.output.is_dir():
        raise ValueError(f"-o {args.output}: is a file, expected a heads folder to write")
    if args.output.is_dir() and any(args.output.iterdir()) and not (args.output / STATE_NAME).is_file():
        raise ValueError(
            f"-o {args.output}: holds files but no training checkpoint ({STATE_NAME}) to resume from; "
            "write the heads to a new or empty folder"
        )
    _check_device(args.device)
    if args.horizon is not None:
        at_least("--horizon", args.horizon, 2)
    for option in ("steps", "batch_size", "seq_len", "prompt_len", "checkpoint_every", "frequent", "negatives"):
        at_least(f"--{option.replace('_', '-')}", getattr(args, option), 1)
    at_least("--warmup", args.warmup, 0)
    finite("--lr", args.lr)  # 0 keeps the given heads (a continued run that only re-saves them)
    for option in ("batch_tokens", "head_hidden", "draft_vocab"):
        if getattr(args, option) is not None:
            at_least(f"--{option.replace('_', '-')}", getattr(args, option), 1)


def _check_device(name: str | None) -> None:
    """``--device``: a torch device this torch can run (checked before the model loads)."""
    import torch

    if name is None:
        return
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name}: not a torch device (cpu, cuda, cuda:1 ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: this torch build sees no CUDA device")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s)")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {name}: training runs on cpu or cuda")


def run_train_heads(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    from ..training import train_heads
    from ..training.head_loss import CandidateSoftmax

    _check_arguments(args)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = AutoModelForCausalLM.from_pretrained(
        str(args.model), local_files_only=True, dtype=getattr(torch, args.dtype)
    ).to(device)
    data = args.data[0] if len(args.data) == 1 and args.data[0].is_dir() else args.data
    init = None
    if args.init_heads is not None:
        from ..hf.heads import DraftHeads

        init = DraftHeads.from_pretrained(args.init_heads, model, strict_name=False)
        if args.horizon is not None and args.horizon < init.horizon:
            raise ValueError(f"--horizon {args.horizon} is below the --init-heads' own ({init.horizon})")
        init = init.extended(args.horizon or init.horizon)
    result = train_heads(
        model,
        data,
        heads=init,
        batch_tokens=args.batch_tokens,
        tokenizer=args.tokenizer,
        horizon=args.horizon or 4,
        head_hidden=args.head_hidden,
        next_token=args.next_token,
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=args.lr,
        warmup=args.warmup,
        draft_vocab=args.draft_vocab,
        targets=args.targets,
        prompt_len=args.prompt_len,
        output_dir=args.output,
        checkpoint_every=args.checkpoint_every,
        resume=not args.no_resume,
        seed=args.seed,
        softmax=CandidateSoftmax(args.frequent, args.negatives) if args.candidate_softmax else None,
        features=args.features,
        overwrite_features=args.overwrite_features,
    )
    last = result.accuracies[-1] if result.accuracies else []
    accuracy = " ".join(f"head{j + 2}={a:.3f}" for j, a in enumerate(last))
    loss = f"{result.losses[-1]:.4f}" if result.losses else "n/a"
    print(f"wrote {args.output}: {result.steps} steps, last loss {loss}, top-1 accuracy {accuracy}")
    return 0
