"""One NgramLM, one model and one set of heads shared by threads that each run generate() and
rescore_batch at once (the C++ core releases the GIL): every call gives what it gives alone.

Also run under ThreadSanitizer (``make tsan``): the core's accesses from those threads (the LM's
tables, the memos' try-lock, rescore_batch's own worker threads) must show no race.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import draftlattice as dl
import draftlattice.hf as dlhf
from _hf_models import left_padded, llama, own_ngram
from _tiny_target import distilled_heads

pytestmark = pytest.mark.usefixtures("one_thread")

THREADS = 4
ROUNDS = 2  # each thread runs every job this many times, in its own order
PROMPTS = [[3, 4, 5], [7, 7, 7, 7, 9], [1], [10, 20, 30, 40, 11, 12], [5, 6], [2, 2, 8]]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """(model, heads, lm): shared by every thread."""
    model = llama()
    heads = distilled_heads(model, horizon=4)
    return model, heads, own_ngram(model, tmp_path_factory.mktemp("concurrency"), PROMPTS)


def generate_job(model, heads, lm, rows: list[int], settings: dict):
    def job():
        ids, mask = left_padded([PROMPTS[r] for r in rows])
        with torch.inference_mode():
            out = model.generate(
                ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=16,
                pad_token_id=0,
                eos_token_id=None,
                custom_generate=dlhf.generate,
                return_dict_in_generate=True,
                draft_heads=heads,
                draft_lm=lm,
                **settings,
            )
        return out.sequences.tolist(), out.draft_stats.accepted

    return job


def rescore_job(lm, seed: int, memos):
    def job():
        rng = np.random.default_rng(seed)
        logits = rng.normal(size=(6, 3, 48)).astype(np.float32)
        contexts = [rng.integers(0, 48, size=rng.integers(0, 5)).tolist() for _ in range(6)]
        results = dl.rescore_batch(logits, lm, contexts, p=4, alpha=0.8, k=4, num_threads=2, memos=memos)
        return [(r.tokens.tolist(), r.scores.tolist(), r.lm_scores.tolist()) for r in results]

    return job


def jobs(model, heads, lm) -> list:
    shared_memos = [dl.LmMemo() for _ in range(6)]  # several threads at once: the try-lock skips them
    return [
        generate_job(model, heads, lm, [0, 1, 3], dict(draft_k=4, draft_p=3, draft_alpha=2.0)),
        generate_job(model, heads, lm, [2, 4], dict(draft_verify="batch", draft_p=2, draft_alpha=1.0)),
        generate_job(model, heads, lm, [5], dict(draft_lookup=2, draft_k=3, draft_p=4)),
        generate_job(model, heads, None, [1, 0, 2, 5], dict(draft_k=3, draft_p=2)),
        rescore_job(lm, 0, None),
        rescore_job(lm, 1, shared_memos),
        rescore_job(lm, 2, shared_memos),
    ]


def test_threads_sharing_the_lm_and_heads_give_the_serial_outputs(shared):
    model, heads, lm = shared
    work = jobs(model, heads, lm)
    alone = [job() for job in work]
    assert any(sum(map(sum, accepted)) for _, accepted in alone[:4])  # drafts were accepted
    results: list[list] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            start.wait()
            for r in range(ROUNDS):
                shift = (t * 3 + r) % len(work)  # each thread, each round: another order
                for i in list(range(shift, len(work))) + list(range(shift)):
                    results[t].append((i, work[i]()))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for t in range(THREADS):
        assert len(results[t]) == ROUNDS * len(work)
        for i, got in results[t]:
            assert got == alone[i], (t, i)
    assert model.config._attn_implementation == "sdpa"  # the engine's attention switch is undone
