"""draftlattice on your own transformers model, end to end.

    python examples/hf_quickstart.py MODEL_DIR CORPUS [--steps 300] [--horizon 4]

MODEL_DIR: a local transformers causal LM folder (with its tokenizer); CORPUS: text, one document
per line. The script trains draft heads (base model frozen), builds a 4-gram LM over the model's
own tokenizer, decodes a few corpus prompts with plain greedy ``generate()`` and with
``custom_generate=draftlattice.hf.generate``, checks the outputs are identical, and prints the
block efficiency (tokens per target call) and tokens/s of both.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import draftlattice.hf as dlhf
from draftlattice import NgramLM
from draftlattice.ngram.build import build_lm
from draftlattice.training import train_heads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--horizon", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--work", type=Path, help="where heads and LM go (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dl_quickstart_"))
    device = "cuda" if torch.cuda.is_available() else "cpu"

    model = AutoModelForCausalLM.from_pretrained(str(args.model_dir), local_files_only=True).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(args.model_dir), local_files_only=True)

    print(f"1. training {args.horizon - 1} draft heads for {args.steps} steps -> {work / 'heads'}")
    train_heads(
        model,
        args.corpus,
        horizon=args.horizon,
        steps=args.steps,
        batch_size=8,
        seq_len=128,
        output_dir=work / "heads",
        progress=True,
    )
    heads = dlhf.DraftHeads.from_pretrained(work / "heads", model)

    print(f"2. building a 4-gram LM over the model's tokenizer -> {work / 'lm.dlm'}")
    build_lm(args.corpus, 4, out_path=work / "lm.dlm", tokenizer=args.model_dir, overwrite=True)
    lm = NgramLM(work / "lm.dlm")

    print("3. decoding")
    lines = [line.strip() for line in args.corpus.read_text().splitlines() if len(line.split()) > 24]
    warm = tokenizer("The", return_tensors="pt").input_ids.to(device)  # first calls pay one-off costs
    model.generate(warm, max_new_tokens=4, pad_token_id=tokenizer.eos_token_id)
    model.generate(
        warm,
        max_new_tokens=4,
        pad_token_id=tokenizer.eos_token_id,
        custom_generate=dlhf.generate,
        draft_heads=heads,
        draft_lm=lm,
    )
    plain_time = draft_time = 0.0
    tokens = calls = 0
    for line in lines[: args.prompts]:
        ids = tokenizer(" ".join(line.split()[:16]), return_tensors="pt").input_ids.to(device)
        common = {"max_new_tokens": args.max_new_tokens, "do_sample": False, "pad_token_id": tokenizer.eos_token_id}
        start = time.perf_counter()
        plain = model.generate(ids, **common)
        plain_time += time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(
            ids,
            **common,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            draft_lm=lm,
            draft_k=8,
            draft_p=4,
            draft_alpha=0.5,
            return_dict_in_generate=True,
        )
        draft_time += time.perf_counter() - start
        assert torch.equal(plain, out.sequences), "draftlattice output differs from generate()"
        tokens += out.draft_stats.new_tokens
        calls += out.draft_stats.target_calls
        print(
            f"   {tokenizer.decode(out.sequences[0, ids.shape[1] :])[:100]!r}  ({out.draft_stats.tokens_per_call:.2f} tokens/call)"
        )
    print(f"block efficiency {tokens / calls:.2f} tokens per target call (plain generate(): 1.00)")
    print(
        f"tokens/s: generate() {tokens / plain_time:.1f}, draftlattice {tokens / draft_time:.1f} "
        f"(speedup {plain_time / draft_time:.2f}x; outputs identical)"
    )


if __name__ == "__main__":
    main()
