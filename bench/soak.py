"""Soak: thousands of decoding steps of mixed generate() calls on the default model, with the
process's resident memory, file descriptors, threads and LM memos sampled as it runs.

Model: the default model (SmolLM2-135M-Instruct, bfloat16, ``load_default(weights="int4")`` so
that ``bundle.step``, the lean int4 target step, is there too) with its shipped heads and 4-gram.
Each call is ``bundle.model.generate(ids, custom_generate=draftlattice.hf.generate, ...,
draft_lm=bundle.lm, return_dict_in_generate=True)``; call ``i`` takes the ``i``-th of a fixed
cycle of settings (:func:`call_settings`) and the ``i``-th of a fixed cycle of prompts (chat
questions through ``bundle.chat_ids``, WikiText-2 raw test openings), seeded ``seed + i``:

* greedy (``bundle.heads``): ``draft_p`` 1-4, each with and without ``draft_lookup=3`` and with
  and without ``draft_step=bundle.step``; two of them on a left-padded batch of 2;
* sampling (``do_sample=True``, ``bundle.sampling_heads``): temperature 0.7 and 1.0, each with
  ``draft_sample="multi"`` and ``"tree"``, ``draft_p`` 2-4; one more with ``draft_lookup=3``, one
  more on the lean step.

``max_new_tokens`` cycles over 32, 48, 64. A *step* is a target call (the sum of
``out.draft_stats.target_calls``, prefills included); the run stops after ``--steps`` of them or
``--minutes``, whichever comes first.

Sampled every ``--every`` seconds, between calls: resident memory (psutil if installed, else
``/proc/self/status`` VmRSS), open file descriptors (``/proc/self/fd``), threads
(``threading.active_count()`` and ``/proc/self/status`` Threads) and the LM memos. The memos
(:class:`draftlattice.LmMemo`) are held by each call's ``LatticeDrafter`` (``drafter.memos``,
one per batch row) and are not reachable from outside a call, so this script swaps the drafter
module's ``LmMemo`` for a subclass that counts its instances (live, created, most alive at once)
and reads each one's ``stats`` (lookups, hits) as it is freed. The memo's API exposes no entry
count: its two tables are direct-mapped and fixed in size (``csrc/lm_memo.h``: 4,096 pair slots
and 8,192 arc slots, 576 KiB), so a memo is bounded by construction; what can grow is how many
are alive.

Reported, the warm-up (the first ``--warmup`` full passes over the cycle of settings, default
one: every setting has run once; see :func:`after_warmup`) left out: the least-squares slope of
RSS against steps (MB per 1,000 steps) and against wall time (MB per hour), the max RSS, fds and
threads at the start (after loading) and the end. ``--tracemalloc`` also diffs Python allocation
snapshots taken at the end of the warm-up and at the end (the 15 largest growths by line;
tensors' storage is not traced, only Python objects).

    nice -n 10 python bench/soak.py --steps 10000 [--minutes 40] [--threads 2] [--every 5]
                                    [--warmup 1] [--json FILE] [--seed 0] [--tracemalloc]

A smoke run of the script itself: ``--steps 1 --every 1`` (one call; 10 s with loading on the 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import threading
import time
import tracemalloc
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

logger = logging.getLogger("soak")

MAX_NEW_TOKENS = (32, 48, 64)
CHAT = 7  # chat questions of draftlattice.apps.demo_prompts.CHAT_QUESTIONS
TEXT = 6  # WikiText-2 raw test openings: 13 prompts, a cycle prime to the settings' (22) and lengths' (3)
MEMO_BYTES = 4096 * 16 + 8192 * 64  # csrc/lm_memo.h: kPairSlots PairSlots + kArcSlots ArcSlots


@dataclass(frozen=True)
class Setting:
    """One generate() call's drafting and sampling keywords."""

    sample: bool
    p: int
    lookup: int = 0
    lean: bool = False
    batch: int = 1
    temperature: float = 1.0
    rule: str = "multi"

    @property
    def label(self) -> str:
        if not self.sample:
            kind = f"greedy p{self.p}"
        else:
            kind = f"T{self.temperature} {self.rule} p{self.p}"
        return kind + (" lookup3" if self.lookup else "") + (" lean" if self.lean else "") + f" b{self.batch}"


def call_settings() -> list[Setting]:
    """The cycle of settings: 16 greedy, 6 sampling (4 plain, one with lookup, one on the lean step)."""
    greedy = [
        Setting(False, p, lookup, lean, batch=2 if (p, lookup) == (2, 0) else 1)
        for p in (1, 2, 3, 4)
        for lookup in (0, 3)
        for lean in (False, True)
    ]
    sampled = [
        Setting(True, p, lookup, lean, temperature=t, rule=rule)
        for t, rule, p, lookup, lean in (
            (0.7, "multi", 2, 0, False),
            (0.7, "tree", 3, 0, False),
            (1.0, "multi", 4, 0, False),
            (1.0, "tree", 4, 0, False),
            (0.7, "multi", 3, 3, False),
            (1.0, "multi", 2, 0, True),
        )
    ]
    return greedy + sampled


# ---- what is sampled ------------------------------------------------------------------------


def proc_status() -> dict[str, int]:
    """VmRSS (kB) and Threads of /proc/self/status."""
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                out[key] = int(value.split()[0])
    return out


def rss_mb() -> float:
    try:
        import psutil
    except ImportError:
        return proc_status()["VmRSS"] / 1024
    return psutil.Process().memory_info().rss / 2**20


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor


class MemoWatch:
    """Counts the LM memos the drafters make (see the module docstring) and sums their stats."""

    def __init__(self) -> None:
        from draftlattice.decode.drafters import lattice

        self.live: weakref.WeakSet = weakref.WeakSet()
        self.created = 0
        self.most_alive = 0
        self.totals = {"pair_lookups": 0, "pair_hits": 0, "arc_lookups": 0, "arc_hits": 0}
        self.most_arc_lookups = 0
        watch = self

        class WatchedMemo(lattice.LmMemo):
            def __init__(self) -> None:
                super().__init__()
                watch.created += 1
                watch.live.add(self)
                watch.most_alive = max(watch.most_alive, len(watch.live))

            def __del__(self) -> None:
                stats = self.stats
                for key in watch.totals:
                    watch.totals[key] += stats[key]
                watch.most_arc_lookups = max(watch.most_arc_lookups, stats["arc_lookups"])

        self._module, self._original = lattice, lattice.LmMemo
        lattice.LmMemo = WatchedMemo

    def restore(self) -> None:
        self._module.LmMemo = self._original

    def sample(self) -> dict:
        return {"live": len(self.live), "created": self.created, "most_alive": self.most_alive, **self.totals}


def sample(start: float, steps: int, calls: int, memos: MemoWatch) -> dict:
    status = proc_status()
    return {
        "seconds": round(time.perf_counter() - start, 2),
        "steps": steps,
        "calls": calls,
        "rss_mb": round(rss_mb(), 2),
        "fds": open_fds(),
        "threads_python": threading.active_count(),
        "threads_os": status["Threads"],
        "memos": memos.sample(),
    }


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs (nan with fewer than 2 distinct xs)."""
    n = len(xs)
    if n < 2:
        return float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return float("nan")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


# ---- the calls ------------------------------------------------------------------------------


def prompt_set(bundle) -> list[list[int]]:
    """CHAT chat questions through the chat template and TEXT text openings, alternating."""
    from draftlattice.apps.demo_prompts import CHAT_QUESTIONS, paragraph_openings
    from draftlattice.assets import WIKITEXT_RAW_TEST, data_file

    chats = [bundle.chat_ids(q) for q in CHAT_QUESTIONS[:CHAT]]
    texts = [
        bundle.tokenizer(t, add_special_tokens=False)["input_ids"]
        for t in paragraph_openings(data_file(WIKITEXT_RAW_TEST), TEXT)
    ]
    mixed = []
    for i in range(max(CHAT, TEXT)):
        mixed += chats[i : i + 1] + texts[i : i + 1]
    return mixed


def batch_of(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask of ``rows``."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def run_call(bundle, setting: Setting, rows: list[list[int]], max_new: int, seed: int) -> int:
    """One generate() call; its target calls."""
    import draftlattice.hf

    pad = bundle.tokenizer.pad_token_id
    pad = pad if pad is not None else bundle.tokenizer.eos_token_id
    ids, mask = batch_of(rows, pad)
    keywords = {"do_sample": False}
    if setting.sample:
        keywords = {
            "do_sample": True,
            "temperature": setting.temperature,
            "top_k": None,
            "top_p": None,
            "draft_sample": setting.rule,
        }
    torch.manual_seed(seed)
    out = bundle.model.generate(
        ids,
        attention_mask=mask,
        pad_token_id=pad,
        max_new_tokens=max_new,
        custom_generate=draftlattice.hf.generate,
        draft_heads=bundle.sampling_heads if setting.sample else bundle.heads,
        draft_lm=bundle.lm,
        draft_p=setting.p,
        draft_lookup=setting.lookup,
        draft_step=bundle.step if setting.lean else None,
        return_dict_in_generate=True,
        **keywords,
    )
    return int(out.draft_stats.target_calls)


class Progress:
    """tqdm on a terminal, else a log line per sample; both with an ETA."""

    def __init__(self, steps: int | None, seconds: float | None) -> None:
        self.steps, self.seconds = steps, seconds
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=steps, unit="step", dynamic_ncols=True)

    def update(self, done: int, added: int, elapsed: float, rss: float) -> None:
        if self.bar is not None:
            self.bar.update(added)
            self.bar.set_postfix(rss=f"{rss:.0f}MB", refresh=False)

    def log(self, done: int, elapsed: float, record: dict) -> None:
        if self.bar is not None:
            return
        rate = done / elapsed if elapsed > 0 else 0.0
        left = []
        if self.steps is not None and rate > 0:
            left.append((self.steps - done) / rate)
        if self.seconds is not None:
            left.append(self.seconds - elapsed)
        eta = max(0.0, min(left)) if left else float("nan")
        logger.info(
            "%d%s steps, %.1f steps/s, ETA %.0f min: RSS %.1f MB, %d fds, %d/%d threads, %d memos live",
            done,
            f"/{self.steps}" if self.steps is not None else "",
            rate,
            eta / 60,
            record["rss_mb"],
            record["fds"],
            record["threads_python"],
            record["threads_os"],
            record["memos"]["live"],
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---- the report -----------------------------------------------------------------------------


def after_warmup(samples: list[dict], warmup_calls: int) -> list[dict]:
    """The samples taken once the first ``warmup_calls`` calls have returned.

    Why a number of calls, one full pass over the settings by default, and not a share of the
    run: each setting (greedy or sampled, p, lookup, the lean step, a batch of 2, the sampling
    rule) runs code and tensor shapes of its own, and the first call of each grows the process
    once (allocator pools for the new shapes, kernels, the lean step's tables). That is not a
    leak; memory that keeps growing once every setting has run is. A share of the steps does not
    know where that point is: in the 40-minute run (bench/results/soak.json) the first 10% of
    the steps (278) ended inside the first pass (the 22 settings ran once by step ~680), and the
    slope after them, +21 MB per 1,000 steps, was mostly the first pass's one-off growth.
    """
    return [s for s in samples if s["calls"] >= warmup_calls]


def summarize(samples: list[dict], warmup_calls: int) -> dict:
    """Slopes after the warm-up (:func:`after_warmup`; nan when fewer than two samples follow
    it), max RSS, fds and threads at the start and the end."""
    after = after_warmup(samples, warmup_calls)
    steps = [s["steps"] for s in after]
    hours = [s["seconds"] / 3600 for s in after]
    rss = [s["rss_mb"] for s in after]
    first, last = samples[0], samples[-1]
    return {
        "steps": last["steps"],
        "calls": last["calls"],
        "seconds": last["seconds"],
        "warmup_calls": warmup_calls,
        "warmup_steps": steps[0] if after else None,  # main() samples as the warm-up's last call returns
        "samples_after_warmup": len(after),
        "rss_slope_mb_per_1000_steps": 1000 * slope(steps, rss),
        "rss_slope_mb_per_hour": slope(hours, rss),
        "rss_after_warmup_first_mb": rss[0] if rss else None,
        "rss_end_mb": last["rss_mb"],
        "rss_max_mb": max(s["rss_mb"] for s in samples),
        "rss_start_mb": first["rss_mb"],
        "fds": [first["fds"], last["fds"]],
        "threads_python": [first["threads_python"], last["threads_python"]],
        "threads_os": [first["threads_os"], last["threads_os"]],
        "memos": last["memos"],
        "memo_bytes_each": MEMO_BYTES,
    }


def rss_line(summary: dict) -> str:
    """The report's line on resident memory after the warm-up."""
    if summary["samples_after_warmup"] < 2:
        return (
            f"RSS after warm-up: no slope, {summary['samples_after_warmup']} samples after the first "
            f"{summary['warmup_calls']} calls (run longer, or sample more often with --every)"
        )
    return (
        f"RSS after warm-up (the first {summary['warmup_calls']} calls, {summary['warmup_steps']} steps, left out; "
        f"{summary['samples_after_warmup']} samples): slope {summary['rss_slope_mb_per_1000_steps']:+.3f} MB per "
        f"1,000 steps, {summary['rss_slope_mb_per_hour']:+.2f} MB per hour; "
        f"{summary['rss_after_warmup_first_mb']:.1f} -> {summary['rss_end_mb']:.1f} MB, max {summary['rss_max_mb']:.1f} MB"
    )


def machine() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def traced_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 15) -> list[str]:
    return [str(stat) for stat in after.compare_to(before, "lineno")[:top]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10000, help="target calls to run (default 10,000)")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--warmup", type=int, default=1, help="full passes over the settings left out of the slope (default 1)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the samples and the summary here")
    parser.add_argument("--tracemalloc", action="store_true", help="diff Python allocations after warm-up")
    args = parser.parse_args(argv)
    if args.steps < 1 or (args.minutes is not None and args.minutes <= 0) or args.warmup < 0:
        parser.error("--steps must be >= 1, --minutes > 0, --warmup >= 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)

    from draftlattice.default_model import load_default

    torch.set_num_threads(args.threads)
    bundle = load_default(weights="int4")
    prompts = prompt_set(bundle)
    settings = call_settings()
    warmup_calls = args.warmup * len(settings)
    memos = MemoWatch()
    seconds = None if args.minutes is None else 60 * args.minutes
    logger.info(
        "soak: %d settings x %d prompts, up to %d steps%s, %d torch threads on %s",
        len(settings),
        len(prompts),
        args.steps,
        f" or {args.minutes} min" if args.minutes else "",
        args.threads,
        machine(),
    )

    start = time.perf_counter()
    samples = [sample(start, 0, 0, memos)]
    progress = Progress(args.steps, seconds)
    steps = calls = 0
    last_sample = start
    warm_snapshot = None
    per_setting: dict[str, int] = {}
    try:
        while steps < args.steps and (seconds is None or time.perf_counter() - start < seconds):
            setting = settings[calls % len(settings)]
            first = calls % len(prompts)
            rows = [prompts[(first + r) % len(prompts)] for r in range(setting.batch)]
            max_new = MAX_NEW_TOKENS[calls % len(MAX_NEW_TOKENS)]
            added = run_call(bundle, setting, rows, max_new, args.seed + calls)
            steps += added
            calls += 1
            per_setting[setting.label] = per_setting.get(setting.label, 0) + added
            now = time.perf_counter()
            progress.update(steps, added, now - start, samples[-1]["rss_mb"])
            if args.tracemalloc and warm_snapshot is None and calls >= warmup_calls:
                tracemalloc.start(8)
                warm_snapshot = tracemalloc.take_snapshot()
            if now - last_sample >= args.every or calls == warmup_calls:  # the slope starts at the warm-up's end
                last_sample = now
                samples.append(sample(start, steps, calls, memos))
                progress.log(steps, now - start, samples[-1])
    finally:
        progress.close()
    samples.append(sample(start, steps, calls, memos))
    growth = None
    if warm_snapshot is not None:
        growth = traced_growth(warm_snapshot, tracemalloc.take_snapshot())
        tracemalloc.stop()
    memos.restore()

    summary = summarize(samples, warmup_calls)
    print(f"machine: {machine()}, torch threads {args.threads}")
    print(f"steps {summary['steps']} in {summary['calls']} calls, {summary['seconds'] / 60:.1f} min")
    print(rss_line(summary))
    print(
        f"fds {summary['fds'][0]} -> {summary['fds'][1]}; threads (python) {summary['threads_python'][0]} -> "
        f"{summary['threads_python'][1]}, (OS) {summary['threads_os'][0]} -> {summary['threads_os'][1]}"
    )
    m = summary["memos"]
    print(
        f"LM memos: {m['created']} created, {m['live']} alive at the end, at most {m['most_alive']} at once "
        f"({MEMO_BYTES // 1024} KiB each, fixed tables; entry counts not exposed); "
        f"arc hits {m['arc_hits']}/{m['arc_lookups']}, pair hits {m['pair_hits']}/{m['pair_lookups']}"
    )
    if growth:
        print("tracemalloc, largest growths after warm-up:")
        for line in growth:
            print("  " + line)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
            "machine": machine(),
            "threads": args.threads,
            "settings": [asdict(s) | {"label": s.label} for s in settings],
            "steps_per_setting": per_setting,
            "summary": summary,
            "tracemalloc_growth": growth,
            "samples": samples,
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
