# Type stubs for the private C++ extension. Keep in step with csrc/bindings/ (one file per core
# concept: errors, ngram, lattice, rescore, sample, oracle, lmbuild, datastore, lowbit, draft_heads). Wrong argument types raise
# TypeError, impossible values ValueError (checked by the core), file errors OSError.
from collections.abc import Sequence
from typing import Any, BinaryIO, overload

import numpy as np

class FormatError(ValueError):
    """A file's content is malformed, truncated or corrupted."""

BINARY_FORMAT_VERSION: int

def binary_checksum(data: bytes | bytearray | memoryview, seed: int = 0) -> int: ...

class LmState:
    """Scoring state: retained history (LM word ids, most recent first); hashable."""

    @property
    def word_ids(self) -> tuple[int, ...]: ...
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class NgramLM:
    """dl::TokenLm: an n-gram model plus the token-id -> LM-word map (see draftlattice.NgramLM)."""

    @overload
    def __init__(
        self,
        source: str | bytes | bytearray | BinaryIO,
        name: str,
        vocab: Sequence[str] | None,
        oov_ln: float,
        copy: bool = False,
    ) -> None: ...
    @overload
    def __init__(self, other: NgramLM, vocab: Sequence[str] | None, oov_ln: float) -> None: ...
    @property
    def order(self) -> int: ...
    @property
    def counts(self) -> list[int]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def source_format(self) -> str: ...
    @property
    def oov_ln(self) -> float: ...
    @property
    def vocab_limit(self) -> int: ...
    @property
    def mapped_words(self) -> int: ...
    @property
    def token_map_bytes(self) -> int: ...
    @property
    def suffix_closed(self) -> bool:
        """Every stored n-gram's suffix is stored (scoring stops at the first absent order)."""
    @property
    def word_bounds(self) -> np.ndarray:
        """[V] float32: per LM word, an upper bound of ln p(word | any history)."""
    def word(self, index: int) -> str: ...
    def words(self) -> list[str]: ...
    def token_scores(self, tokens: Any, context: Any, bos: bool, eos: bool) -> np.ndarray: ...
    def search_bounds(self, prev: Any, tokens: Any, before: Any = None) -> np.ndarray:
        """[len(prev), len(tokens)] float32: the rescoring search's upper bound of
        ln p(tokens[j] | any history ending in token prev[i]); with ``before``, of the histories
        whose token before prev[i] is one of ``before`` (for tests)."""
    def start(self, context: Any, bos: bool) -> LmState: ...
    def advance(self, state: LmState, tokens: Any) -> LmState: ...
    def step(self, state: LmState, token: int) -> tuple[float, LmState]: ...
    def step_eos(self, state: LmState) -> tuple[float, LmState]: ...
    def save(self, path: str, overwrite: bool) -> None: ...

# --- lattice.cc ---
import numpy as _np

def topk_logprobs(logits: _np.ndarray, k: int, temperature: float = 1.0) -> tuple[_np.ndarray, _np.ndarray]: ...

class Lattice:
    @staticmethod
    def from_logits(logits: _np.ndarray, k: int, temperature: float = 1.0) -> Lattice: ...
    @staticmethod
    def from_logits_batch(
        logits: _np.ndarray, k: int, temperature: float = 1.0, num_threads: int | None = None
    ) -> list[Lattice]: ...
    @staticmethod
    def from_topk(tokens: Any, logprobs: Any, vocab_size: int | None = None) -> Lattice: ...
    @property
    def h(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def tokens(self) -> _np.ndarray: ...
    @property
    def logprobs(self) -> _np.ndarray: ...
    def to_fst_text(self) -> str: ...
    def to_dot(self, words: list[str] = ...) -> str: ...

# --- rescore.cc: context = token ids or an LmState of lm ---
def rescore(
    lattice: Lattice,
    lm: NgramLM,
    p: int,
    alpha: float,
    context: Any | LmState,
    bos: bool,
    result_type: type | None = None,
) -> Any: ...

class LmMemo:
    def __init__(self) -> None: ...
    @property
    def stats(self) -> dict[str, int]: ...

def rescore_stats(
    lattice: Lattice, lm: NgramLM, p: int, alpha: float, context: Any | LmState, bos: bool
) -> tuple[int, int, int]: ...
def rescore_seconds(
    lattice: Lattice, lm: NgramLM, p: int, alpha: float, context: Any | LmState, bos: bool, repeats: int
) -> float: ...
def rescore_batch(
    lattices: Sequence[Lattice],
    lm: NgramLM,
    p: int,
    alpha: float,
    contexts: Sequence[Any | LmState] | None,
    bos: bool,
    num_threads: int | None,
    memos: Sequence[LmMemo | None] | None = None,
    result_type: type | None = None,
) -> list[Any]: ...
def check_rescore_options(p: int, alpha: float) -> None: ...

# --- best_nodes.cc ---
def best_nodes_batch(
    lattices: Sequence[Lattice],
    lm: NgramLM | None,
    nodes: int,
    alpha: float,
    contexts: Sequence[Any | LmState] | None,
    bos: bool,
    num_threads: int | None,
    memos: Sequence[LmMemo | None] | None = None,
) -> list[tuple[Any, Any, Any, Any, Any]]: ...

# --- sample.cc ---
def sample_drafts(
    lattice: Lattice,
    lm: NgramLM,
    n: int,
    alpha: float,
    context: _np.ndarray | LmState,
    bos: bool,
    seed: int,
    other_logprobs: _np.ndarray | None = None,
) -> tuple[_np.ndarray, _np.ndarray, _np.ndarray, float]: ...
def sample_drafts_batch(
    lattices: list[Lattice],
    lm: NgramLM,
    n: int,
    alpha: float,
    contexts: list[_np.ndarray],
    bos: bool,
    seeds: list[int],
    num_threads: int,
    other_logprobs: list[_np.ndarray] | None = None,
) -> list[tuple[_np.ndarray, _np.ndarray, _np.ndarray, float]]: ...

# --- oracle.cc ---
def oracle_drafts(lattices: list[Lattice], references: _np.ndarray) -> tuple[_np.ndarray, _np.ndarray]: ...

# --- lmbuild.cc (csrc/lmbuild/) ---
class NgramCounter:
    def __init__(self, order: int) -> None: ...
    @property
    def order(self) -> int: ...
    @property
    def sentences(self) -> int: ...
    @property
    def tokens(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    def memory_bytes(self) -> int: ...
    def add_text(self, text: bytes) -> None: ...
    def add_token_batch(self, ids: Any, offsets: Any) -> None: ...
    def num_ngrams(self, order: int) -> int: ...
    def items(self, order: int) -> list[tuple[tuple[str, ...], int]]: ...

class KatzModel:
    @property
    def order(self) -> int: ...
    def counts(self) -> list[int]: ...
    @property
    def count_of_counts(self) -> list[list[int]]: ...
    @property
    def discounts(self) -> list[list[float]]: ...
    def prune(self, threshold: float | None = None, target: int | None = None) -> tuple[float, int]: ...
    def write_arpa(self, path: str, metadata: list[tuple[str, str]] = ..., digits: int = 7) -> None: ...
    def write_binary(self, path: str, metadata: list[tuple[str, str]] = ..., overwrite: bool = False) -> None: ...
    def ngrams(self, order: int) -> tuple[_np.ndarray, _np.ndarray, _np.ndarray]: ...
    def words(self) -> list[str]: ...

def estimate_katz(counter: NgramCounter, min_counts: Sequence[int] | None = None) -> KatzModel: ...
def check_build_options(
    order: int, min_counts: Sequence[int] | None, prune_threshold: float | None, prune_to: int | None
) -> None: ...

# --- datastore.cc ---
class TokenDatastore:
    def __init__(self, tokens: _np.ndarray, offsets: _np.ndarray, depth: int) -> None: ...
    def continuation(
        self, context: Sequence[int], max_ngram: int, min_ngram: int, length: int, min_count: int
    ) -> list[int]: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def num_records(self) -> int: ...
    @property
    def depth(self) -> int: ...

# --- lowbit.cc (arrays used in place: exact dtypes, C-contiguous; bf16 and float16 as int16/uint16 bits) ---
def lowbit_matmul(
    x: _np.ndarray,
    bits: int,
    codes: _np.ndarray,
    scales: _np.ndarray,
    mins: _np.ndarray | None,
    n: int,
    out: _np.ndarray,
    threads: int,
    kernel: str = "auto",
) -> None: ...
def lowbit_kernels() -> list[str]: ...
def fused_step_runs(head_dim: int, kernel: str = "auto") -> bool: ...

class LlamaStack:
    def __init__(
        self,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        intermediate: int,
        eps: float,
        layers: list[tuple[_np.ndarray, ...]],
        final_norm: _np.ndarray,
        kernel: str = "auto",
    ) -> None: ...
    def forward(
        self,
        x: _np.ndarray,
        batch: int,
        tokens: int,
        cos: _np.ndarray,
        sin: _np.ndarray,
        keys: list[_np.ndarray],
        values: list[_np.ndarray],
        length: int,
        mask: _np.ndarray,
        normed: _np.ndarray,
        threads: int,
    ) -> None: ...

# --- draft_heads.cc ---
class DraftHeadsStep:
    def __init__(
        self,
        count: int,
        hidden: int,
        width: int,
        vocab: int,
        embedding: _np.ndarray | None,
        bits: int,
        up: tuple[_np.ndarray, _np.ndarray, _np.ndarray | None],
        up_bias: _np.ndarray,
        down: tuple[_np.ndarray, _np.ndarray, _np.ndarray | None],
        down_bias: _np.ndarray,
        rows_bits: int,
        rows: tuple[_np.ndarray, _np.ndarray, _np.ndarray | None],
        rows_n: int,
        row_tokens: _np.ndarray | None,
        kernel: str = "auto",
    ) -> None: ...
    def forward(self, z: _np.ndarray, next: _np.ndarray, logits: _np.ndarray, threads: int) -> None: ...
