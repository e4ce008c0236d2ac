"""OpenFST references for the rescoring benchmark: data paths, the cached LM automata, the C++
exact-backoff runner (bench/openfst/lmfst.cc), the pynini epsilon-backoff runner, and the
lattice generators.

Nothing here belongs to the package: it is benchmark scaffolding. Needs `apt-get install
libfst-dev g++ xz-utils` (the C++ reference) and `pip install pynini numpy` (the epsilon one).
"""

from __future__ import annotations

import lzma
import math
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
LMFST_SRC = ROOT / "bench" / "openfst" / "lmfst.cc"
LN10 = math.log(10.0)
# Runs of one lattice stop after `repeats` or once they add up to this (as in lmfst.cc).
ENOUGH_SECONDS = 0.01


def lmfst_binary() -> Path:
    """Compile bench/openfst/lmfst.cc against Debian's libfst-dev (cached)."""
    exe = CACHE / "lmfst"
    if exe.exists() and exe.stat().st_mtime >= LMFST_SRC.stat().st_mtime:
        return exe
    if not Path("/usr/include/fst/fstlib.h").exists():
        raise RuntimeError("OpenFST headers missing: apt-get install libfst-dev")
    CACHE.mkdir(parents=True, exist_ok=True)
    cmd = ["g++", "-O2", "-std=c++17", str(LMFST_SRC), "-o", str(exe), "-lfst", "-lpthread", "-ldl"]
    subprocess.run(cmd, check=True)
    return exe


def decompressed_arpa(arpa: Path) -> Path:
    """An uncompressed copy of an .arpa.xz in the cache (the C++ reader wants plain text)."""
    if arpa.suffix != ".xz":
        return arpa
    out = CACHE / arpa.name[:-3]
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with lzma.open(arpa, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        tmp.rename(out)
    return out


@dataclass
class LmAutomata:
    """Paths of one ARPA's automata (converted once, cached)."""

    directory: Path
    arpa: Path  # plain-text ARPA
    words: list[str]
    phi_label: int
    convert_seconds: float | None  # None when taken from the cache

    @property
    def phi_fst(self) -> Path:
        return self.directory / "lm_phi.fst"

    @property
    def eps_fst(self) -> Path:
        return self.directory / "lm_eps.fst"


def convert(arpa: Path, name: str | None = None) -> LmAutomata:
    plain = decompressed_arpa(arpa)
    name = name or plain.name.replace(".arpa", "")
    directory = CACHE / f"fst-{name}"
    seconds = None
    if not (directory / "meta.txt").exists():
        directory.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        subprocess.run([str(lmfst_binary()), "convert", str(plain), str(directory)], check=True)
        seconds = time.perf_counter() - t0
    words = (directory / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    meta = dict(line.split() for line in (directory / "meta.txt").read_text().splitlines())
    return LmAutomata(directory, plain, words, int(meta["phi_label"]), seconds)


@dataclass
class Lattices:
    """n lattices of one shape: tokens/logprobs [n, h, k], contexts [n, c] (-1 padded)."""

    tokens: np.ndarray
    logprobs: np.ndarray
    contexts: np.ndarray

    @property
    def n(self) -> int:
        return self.tokens.shape[0]

    def context(self, i: int) -> tuple[int, ...]:
        return tuple(int(t) for t in self.contexts[i] if t >= 0)


@dataclass
class FstResult:
    """Per-lattice latency (s), start LM state, and the p best paths (best first)."""

    seconds: np.ndarray  # [n]
    start_states: np.ndarray  # [n]
    tokens: np.ndarray  # [n, p, h], -1 padded
    scores: np.ndarray  # [n, p] natural log, NaN padded
    composed_states: np.ndarray | None = None  # [n] states of lattice x LM (exact run only)


def run_openfst_exact(
    lm: LmAutomata, jobs: list[tuple[Lattices, int]], alpha: float, repeats: int, warmup: int = 10
) -> list[FstResult]:
    """For each (lattices, p): lazy ComposeFst(lattice, LM) with a PhiMatcher +
    ShortestPath(p), timed in C++ (one process, one LM load for all jobs)."""
    args = [str(lmfst_binary()), "bench", str(lm.phi_fst), repr(alpha), str(repeats), str(warmup)]
    files = []
    for j, (lat, p) in enumerate(jobs):
        n, h, k = lat.tokens.shape
        src = CACHE / f"lattices-{os.getpid()}-{j}.bin"
        out = CACHE / f"openfst-{os.getpid()}-{j}.bin"
        with open(src, "wb") as f:
            np.array([n, h, k, lat.contexts.shape[1]], dtype=np.int32).tofile(f)
            lat.tokens.astype(np.int32).tofile(f)
            lat.logprobs.astype(np.float32).tofile(f)
            lat.contexts.astype(np.int32).tofile(f)
        args += [str(src), str(p), str(out)]
        files.append((src, out))
    try:
        subprocess.run(args, check=True)
        return [_read_result(out, lat, p) for (_, out), (lat, p) in zip(files, jobs)]
    finally:
        for src, out in files:
            src.unlink(missing_ok=True)
            out.unlink(missing_ok=True)


class OpenFstServer:
    """A running `lmfst bench ... -` process: one LM load, jobs sent one at a time, so that the
    benchmark can time the engines shape by shape, close together in time."""

    def __init__(self, lm: LmAutomata, alpha: float, repeats: int, warmup: int = 10):
        self.proc = subprocess.Popen(
            [str(lmfst_binary()), "bench", str(lm.phi_fst), repr(alpha), str(repeats), str(warmup), "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.count = 0

    def run(self, lat: Lattices, p: int) -> FstResult:
        n, h, k = lat.tokens.shape
        self.count += 1
        src = CACHE / f"lattices-{os.getpid()}-s{self.count}.bin"
        out = CACHE / f"openfst-{os.getpid()}-s{self.count}.bin"
        try:
            with open(src, "wb") as f:
                np.array([n, h, k, lat.contexts.shape[1]], dtype=np.int32).tofile(f)
                lat.tokens.astype(np.int32).tofile(f)
                lat.logprobs.astype(np.float32).tofile(f)
                lat.contexts.astype(np.int32).tofile(f)
            self.proc.stdin.write(f"{src} {p} {out}\n")
            self.proc.stdin.flush()
            if self.proc.stdout.readline().strip() != "done":
                raise RuntimeError(f"lmfst failed (exit {self.proc.poll()})")
            return _read_result(out, lat, p)
        finally:
            src.unlink(missing_ok=True)
            out.unlink(missing_ok=True)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def _read_result(path: Path, lat: Lattices, p: int) -> FstResult:
    n, h, _ = lat.tokens.shape
    raw = path.read_bytes()
    off = 0

    def take(dtype, count):
        nonlocal off
        a = np.frombuffer(raw, dtype=dtype, count=count, offset=off)
        off += a.nbytes
        return a.copy()

    n2, p2 = take(np.int32, 2)
    assert (n2, p2) == (n, p), (n2, p2, n, p)
    starts = take(np.int32, n)
    seconds = take(np.float64, n)
    take(np.int32, n)  # number of paths found
    tokens = take(np.int32, n * p * h).reshape(n, p, h)
    scores = take(np.float64, n * p).reshape(n, p)
    composed_states = take(np.int64, n)
    return FstResult(seconds, starts, tokens, scores, composed_states)


class PyniniEpsilon:
    """The same LM with epsilon backoff arcs (the usual approximation), through pynini."""

    def __init__(self, lm: LmAutomata):
        import pynini  # pip install pynini

        self.pynini = pynini
        self.lm = pynini.Fst.read(str(lm.eps_fst))
        if not self.lm.properties(pynini.FstProperties.I_LABEL_SORTED, True):
            self.lm.arcsort("ilabel")

    def lattice_fst(self, tokens: np.ndarray, logprobs: np.ndarray, alpha: float):
        pn = self.pynini
        h, k = tokens.shape
        f = pn.Fst()
        f.add_states(h + 1)
        f.set_start(0)
        f.set_final(h)
        for t in range(h):
            for j in range(k):
                label = int(tokens[t, j]) + 1
                f.add_arc(t, pn.Arc(label, label, pn.Weight("tropical", -float(logprobs[t, j]) / alpha), t + 1))
        f.arcsort("olabel")
        return f

    def run(self, lat: Lattices, starts: np.ndarray, p: int, alpha: float, repeats: int) -> FstResult:
        pn = self.pynini
        n, h, _ = lat.tokens.shape
        seconds = np.empty(n)
        tokens = np.full((n, p, h), -1, dtype=np.int32)
        scores = np.full((n, p), np.nan)
        for i in range(n):
            lattice = self.lattice_fst(lat.tokens[i], lat.logprobs[i], alpha)
            self.lm.set_start(int(starts[i]))
            runs = []
            while len(runs) < repeats and (not runs or sum(runs) < ENOUGH_SECONDS):
                t0 = time.perf_counter()
                best = pn.shortestpath(pn.compose(lattice, self.lm), nshortest=p, unique=p > 1)
                runs.append(time.perf_counter() - t0)
            seconds[i] = sorted(runs)[len(runs) // 2]
            paths = sorted(_paths(best), key=lambda wp: wp[0])
            for q, (w, words) in enumerate(paths[:p]):
                scores[i, q] = -alpha * w
                tokens[i, q] = words
        return FstResult(seconds, starts, tokens, scores)


def _paths(f):
    """All (weight, olabels-1) paths of an acyclic FST."""
    out = []
    stack = [(f.start(), 0.0, [])]
    zero = float("inf")
    while stack:
        s, w, words = stack.pop()
        final = float(f.final(s))
        if final != zero:
            out.append((w + final, words))
        for arc in f.arcs(s):
            nw = words + [arc.olabel - 1] if arc.olabel else words
            stack.append((arc.nextstate, w + float(arc.weight), nw))
    return out


# ----------------------------------------------------------------------------- lattices


class LatticeMaker:
    """Benchmark lattices over the ARPA's words (token id = index in the ARPA's unigram list).

    kind "unigram": candidates drawn from the unigram distribution without replacement.
    kind "plausible": at a real WikiText-2 test position, head i's candidates are the true word
    i, the LM's most likely continuations of the true history (exact Katz probabilities, read
    from the phi automaton), then unigram draws. Both kinds: head scores = log-softmax over the
    k candidates of noisy logits (plausible: the true word and LM words get a bonus), sorted
    best first; context = the `context_len` WikiText words before the position.
    """

    def __init__(self, lm: LmAutomata, text: Path, context_len: int = 3):
        import pynini

        self.words = lm.words
        self.index = {w: i for i, w in enumerate(lm.words)}
        self.phi = lm.phi_label
        self.fst = pynini.Fst.read(str(lm.phi_fst))
        banned = {self.index.get(w) for w in ("<s>", "</s>")} - {None}
        # Unigram distribution from the empty-context state (state 0): -ln p per word.
        uni = np.full(len(self.words), np.inf)
        self.null_arcs = {}
        for arc in self.fst.arcs(0):
            if arc.ilabel != self.phi:
                uni[arc.ilabel - 1] = float(arc.weight)
                self.null_arcs[arc.ilabel - 1] = (float(arc.weight), arc.nextstate)
        prob = np.exp(-uni)
        for b in banned:
            prob[b] = 0.0
        self.banned = banned
        self.unigram = prob / prob.sum()
        self.top_unigrams = [int(i) for i in np.argsort(-prob)[:64]]
        text_words = text.read_text(encoding="utf-8").split()
        ids = [self.index.get(w, -1) for w in text_words]
        self.text = np.array(ids, dtype=np.int64)
        self.context_len = context_len
        self._state_arcs: dict[int, dict[int, tuple[float, int]]] = {0: self.null_arcs}

    # exact LM access through the phi automaton
    def _arcs(self, s: int) -> dict[int, tuple[float, int]]:
        d = self._state_arcs.get(s)
        if d is None:
            d = {}
            for arc in self.fst.arcs(s):
                key = -1 if arc.ilabel == self.phi else arc.ilabel - 1
                d[key] = (float(arc.weight), arc.nextstate)
            if len(self._state_arcs) > 200_000:
                self._state_arcs = {0: self.null_arcs}
            self._state_arcs[s] = d
        return d

    def step(self, s: int, w: int) -> tuple[float, int]:
        """(-ln p(w | state s), next state), failure semantics."""
        cost = 0.0
        while True:
            arcs = self._arcs(s)
            if w in arcs:
                c, nxt = arcs[w]
                return cost + c, nxt
            c, s = arcs[-1]
            cost += c

    def state_after(self, words) -> int:
        s = 0
        for w in words:
            s = self.step(s, int(w))[1]
        return s

    def top_continuations(self, s: int, m: int) -> list[int]:
        """The m most likely next words at state s (exact)."""
        best: dict[int, float] = {}
        cost = 0.0
        while True:
            arcs = self._arcs(s) if s != 0 else None
            if arcs is None:  # empty context: the unigram leaders are enough for m <= 64
                for w in self.top_unigrams:
                    if w not in best:
                        best[w] = cost + self.null_arcs[w][0]
                break
            for w, (c, _) in arcs.items():
                if w >= 0 and w not in best and w not in self.banned:
                    best[w] = cost + c
            c, s = arcs[-1]
            cost += c
        return [w for w, _ in sorted(best.items(), key=lambda kv: (kv[1], kv[0]))[:m]]

    def make(self, kind: str, n: int, h: int, k: int, seed: int) -> Lattices:
        rng = np.random.default_rng(seed)
        tokens = np.empty((n, h, k), dtype=np.int32)
        logprobs = np.empty((n, h, k), dtype=np.float32)
        contexts = np.empty((n, self.context_len), dtype=np.int32)
        c = self.context_len
        for i in range(n):
            while True:  # a text position whose context and next h words are all known
                pos = int(rng.integers(c, len(self.text) - h))
                window = self.text[pos - c : pos + h]
                if (window >= 0).all() and not any(int(w) in self.banned for w in window):
                    break
            contexts[i] = window[:c]
            history = list(window[:c])
            for t in range(h):
                bonus = {}
                cand: list[int] = []
                if kind == "plausible":
                    true = int(window[c + t])
                    cand.append(true)
                    bonus[true] = 2.0
                    n_lm = max(1, k // 2) if k > 1 else 0
                    for w in self.top_continuations(self.state_after(history[-c:]), n_lm + 1):
                        if len(cand) >= 1 + n_lm:
                            break
                        if w not in cand:
                            cand.append(w)
                            bonus[w] = 1.0
                    history.append(true)
                cand = cand[:k]
                while len(cand) < k:
                    for w in rng.choice(len(self.unigram), size=2 * k, p=self.unigram):
                        if int(w) not in cand and len(cand) < k:
                            cand.append(int(w))
                logits = rng.normal(0.0, 1.5, size=k) + np.array([bonus.get(w, 0.0) for w in cand])
                logp = logits - np.logaddexp.reduce(logits)
                order = np.argsort(-logp, kind="stable")
                tokens[i, t] = np.array(cand)[order]
                logprobs[i, t] = logp[order]
        return Lattices(tokens, logprobs, contexts)
