"""What a retrieval draft costs: indexing the shipped datastore, and one query against the context
copy's own search (``decode.drafters.lookup.continuation``, prompt lookup) on the same contexts.

Contexts: every 4th position of the held-out greedy answers of the v3 recipe
(``runs/heads-v3-int4/heldout-greedy``, prompts the datastore never saw), the context up to it.
Medians of ``--rounds`` rounds over all contexts, after one untimed round.

    python bench/datastore_speed.py [--rounds 5] [--length 4]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from draftlattice import Datastore
from draftlattice.assets import model_asset
from draftlattice.decode.drafters.lookup import continuation
from draftlattice.distilled_corpus import DistilledCorpus


def timed(function, rounds: int) -> float:
    function()  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--length", type=int, default=4, help="longest draft asked for")
    parser.add_argument("--heldout", default="runs/heads-v3-int4/heldout-greedy")
    args = parser.parse_args()
    path = model_asset("smollm2/datastore.npz")
    store = Datastore.load(path)
    build = timed(lambda: Datastore(store.tokens, store.offsets), args.rounds)
    heldout = DistilledCorpus.load(args.heldout)
    contexts = []
    for r in range(len(heldout)):
        record = heldout.record(r).tolist()
        contexts += [record[:t] for t in range(int(heldout.prompt_lens[r]), len(record), 4)]
    query = timed(lambda: [store.continuation(c, args.length) for c in contexts], args.rounds)
    copy = timed(lambda: [continuation(c, 3, args.length) for c in contexts], args.rounds)
    found = sum(bool(store.continuation(c, args.length)) for c in contexts)
    print(f"{platform.processor() or platform.machine()}; {path}: {store.num_tokens:,} tokens")
    print(f"index build: {build:.2f} s (median of {args.rounds})")
    print(f"{len(contexts):,} held-out contexts, drafts of <= {args.length} tokens ({found:,} found in the datastore):")
    print(f"  datastore query     {1e6 * query / len(contexts):8.1f} us")
    print(f"  context copy search {1e6 * copy / len(contexts):8.1f} us (prompt lookup, n <= 3; the reference)")


if __name__ == "__main__":
    main()
