"""Does a larger datastore lift the copied draft, and its draft beside the copy? Tokens per target
call of the ``lookup`` drafter (the context's copy, else the datastore's continuation;
``ContextLookup(None, ...)``, the demo's ``lookup`` row) with datastores of the first N answers of
the recipe's distilled corpus, against no datastore in the same run; with ``--retrieval n`` the
datastore's draft of up to n tokens also beside a copy (a second branch), and the tree's nodes.

Replayed from the int4 step's own greedy answers to the held-out prompts (``heldout-greedy``,
which no datastore saw), no model run: the lean step computes every row of a verification as it
computes that token alone (bit for bit), so its greedy decoding with any draft is those answers,
and a step accepts the draft's longest prefix that matches them, then adds the target's next
token. Exact and independent of the machine's load.

    python bench/datastore_size.py [--records 6144 12288 24576 49152] [--copy-tokens 2 4 6] [--retrieval 0]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from draftlattice import Datastore
from draftlattice.decode.drafters.lookup import ContextLookup
from draftlattice.distilled_corpus import DistilledCorpus


def tokens_per_call(drafter: ContextLookup, heldout: DistilledCorpus, max_new: int) -> tuple[float, float]:
    """New tokens per target call (prefill left out) of greedy decoding of every held-out answer,
    and the tree's nodes a call (the root and the drafts' distinct prefixes)."""
    calls = tokens = nodes = 0
    for r in range(len(heldout)):
        record = heldout.record(r).tolist()
        n, end = int(heldout.prompt_lens[r]) + 1, min(len(record), int(heldout.prompt_lens[r]) + max_new)
        while n < end:  # the prefill committed record[prompt_len]; each call commits accepted + 1
            drafts, longest = drafter.copies(record[:n]), 0
            for draft in drafts:
                accepted = 0
                while accepted < len(draft) and n + accepted < end and draft[accepted] == record[n + accepted]:
                    accepted += 1
                longest = max(longest, accepted)
            n += longest + 1
            calls, tokens = calls + 1, tokens + longest + 1
            nodes += 1 + len({tuple(d[: i + 1]) for d in drafts for i in range(len(d))})
    return tokens / calls, nodes / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="runs/heads-v3-int4/distill-greedy")
    parser.add_argument("--heldout", default="runs/heads-v3-int4/heldout-greedy")
    parser.add_argument("--records", type=int, nargs="+", default=[6144, 12288, 24576, 49152])
    parser.add_argument("--copy-tokens", type=int, nargs="+", default=[2, 4, 6])
    parser.add_argument("--lookup", type=int, default=3, help="longest context suffix the copy matches")
    parser.add_argument(
        "--retrieval", type=int, nargs="+", default=[0], help="the datastore's draft beside a copy (tokens; 0: none)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    corpus, heldout = DistilledCorpus.load(args.corpus), DistilledCorpus.load(args.heldout)
    answers = [corpus.record(r)[corpus.prompt_lens[r] :] for r in range(len(corpus))]
    print(f"{len(heldout)} held-out answers of <= {args.max_new_tokens} tokens; {args.corpus}: {len(corpus):,} records")
    print(
        "| datastore | beside a copy | answer tokens | file MB | "
        + " | ".join(f"<= {n} tokens (nodes)" for n in args.copy_tokens)
        + " |"
    )
    print("| --- | --- | ---: | ---: |" + " ---: |" * len(args.copy_tokens))
    for records, retrieval in [(0, 0)] + [(n, r) for n in args.records if n <= len(corpus) for r in args.retrieval]:
        store = Datastore.from_records(answers[:records]) if records else None
        size = "-"
        if store is not None:
            with tempfile.TemporaryDirectory() as folder:
                store.save(Path(folder) / "datastore.npz")
                size = f"{(Path(folder) / 'datastore.npz').stat().st_size / 1e6:.1f}"
        rates = [
            tokens_per_call(
                ContextLookup(None, args.lookup, n, datastore=store, retrieval=min(retrieval, n)),
                heldout,
                args.max_new_tokens,
            )
            for n in args.copy_tokens
        ]
        label = f"first {records:,} answers" if records else "none (the copy alone)"
        beside = f"<= {retrieval} tokens" if retrieval else "-"
        tokens = f"{store.num_tokens:,}" if store is not None else "0"
        cells = " | ".join(f"{rate:.3f} ({nodes:.2f})" for rate, nodes in rates)
        print(f"| {label} | {beside} | {tokens} | {size} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
