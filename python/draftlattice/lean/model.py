"""A lean forward of a Llama-architecture model: the engine's target step without transformers'
per-call overhead.

Why: at the default model's size (135M parameters, 30 layers) transformers' eager step spends as
much time in Python and small ops (a dozen norm, rotary and cache ops per layer, mask building,
cache concatenation) as in its matmuls, and reads every weight in bf16. This step is the same
mathematics in few ops per layer: the query/key/value projections fused into one matmul and the
gate/up projections into another, one fused RMS norm, the rotary tables looked up instead of
recomputed, keys and values written in place into a :class:`~.cache.StaticCache`, grouped-query
attention without repeating the cache, and the weights in the format asked for
(:mod:`.linear`: dense, int8 or int4).

It reads the weights of a transformers ``LlamaForCausalLM`` (shared, not copied, for dense
weights in the model's dtype) and leaves that model untouched: plain ``generate()`` still runs the
original. The engine calls it through ``Engine(step=...)`` / ``generate(..., draft_step=...)``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _core
from ..decode.cache import additive_mask
from .cache import StaticCache
from .heads import HeadLogits, LeanHeads
from .linear import check_weights, make_linear
from .lowbit import best_kernel, check_kernel

logger = logging.getLogger(__name__)

SUPPORTED_TYPES = ("llama",)
FUSED_TOKENS = 64  #: tokens a fused call takes (longer steps, i.e. prompts, run in pieces of this many)
INITIAL_CAPACITY = 256  #: slots a new cache starts with beyond the prompt (it doubles when full)


class _Layer:
    """One decoder layer's weights in the step's format."""

    def __init__(self, layer, weights: str, dtype: torch.dtype, kernel: str) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
        self.qkv = make_linear(qkv, weights, dtype, kernel)
        self.o = make_linear(attn.o_proj.weight, weights, dtype, kernel)
        self.gate_up = make_linear(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), weights, dtype, kernel)
        self.down = make_linear(mlp.down_proj.weight, weights, dtype, kernel)
        self.attn_norm = layer.input_layernorm.weight.detach().to(dtype)
        self.mlp_norm = layer.post_attention_layernorm.weight.detach().to(dtype)


class _LeanHeadsOf(NamedTuple):
    """The :class:`~.heads.LeanHeads` of ``heads`` (None: they do not fit), built from their
    ``params`` at those ``versions``."""

    heads: object
    params: list
    versions: tuple | None
    lean: LeanHeads | None


class LeanLlama:
    """The target step of a Llama-architecture model in weight format ``weights``.

    Attributes:
        weights: "dense", "int8" or "int4" (:data:`~.linear.WEIGHT_FORMATS`).
        dtype: the compute dtype (the model's for dense weights, bfloat16 for quantized ones).
        kernel: the quantized layers' kernel: "auto" (:func:`~.lowbit.best_kernel`: ours where
            the CPU has AVX2, AVX-512 BF16 or AVX-512 VNNI, else "torch"), "torch", or one of
            ``_core.lowbit_kernels()``.
        fused: whether int4 steps run all their layers in one C++ call (``_core.LlamaStack``)
            on our kernels (any but "torch"; its attention on AVX-512 BF16 beside the AVX-512
            kernels, in plain C++ beside the others; a head size that is a multiple of 8), a
            prompt longer than :data:`FUSED_TOKENS` tokens in pieces of that many;
            :attr:`fused` says whether they do.
    """

    def __init__(self, model, weights: str = "dense", kernel: str = "auto", fused: bool = True) -> None:
        config = model.config
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_TYPES:
            raise ValueError(
                f"the lean step supports {', '.join(SUPPORTED_TYPES)} models, not {model_type!r} "
                f"({type(model).__name__}): decode it without draft_step"
            )
        for flag in ("attention_bias", "mlp_bias"):
            if getattr(config, flag, False):
                raise ValueError(f"the lean step does not support {flag}=True (model {type(model).__name__})")
        rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
        if "dynamic" in str(rope.get("rope_type", rope.get("type", ""))):
            # its tables depend on the sequence's length; the step looks up one table for all
            raise ValueError(f"the lean step does not support dynamic rope scaling ({rope})")
        self.weights = check_weights(weights)
        model_dtype = model.get_output_embeddings().weight.dtype
        self.dtype = model_dtype if weights == "dense" else torch.bfloat16
        self.hidden_size = config.hidden_size
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or self.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.max_positions = config.max_position_embeddings
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        body = model.base_model
        self.device = model.get_output_embeddings().weight.device
        self.embed = body.embed_tokens.weight.detach().to(self.dtype)
        self.kernel = best_kernel() if check_kernel(kernel) == "auto" else kernel
        self.layers = [_Layer(layer, weights, self.dtype, self.kernel) for layer in body.layers]
        self.norm = body.norm.weight.detach().to(self.dtype)
        # int8 for a quantized step: the default model's GGUF keeps its (tied) output layer in
        # Q8_0, and 4 bits move its argmax.
        self.head_format = "dense" if weights == "dense" else "int8"
        # The heads' draft-vocabulary rows of it only draft (the target verifies every draft):
        # 4 bits read half the bytes, ~0.2 ms a call for 16,384 rows, with the same demo drafts.
        self.draft_format = "dense" if weights == "dense" else "int4"
        self._output_weight = model.get_output_embeddings().weight  # shared, for the heads' rows
        self.output_layer = make_linear(self._output_weight, self.head_format, self.dtype, self.kernel)
        self._kernel_threads = 0  # the threads our kernels were last given (see _threads)
        self._in_step = False
        linears = [lin for layer in self.layers for lin in (layer.qkv, layer.o, layer.gate_up, layer.down)]
        self._lowbit = [lin for lin in [*linears, self.output_layer] if _runs_our_kernel(lin)]
        self.intermediate = config.intermediate_size
        self._stack = self._fused_stack() if fused else None
        self.fused = self._stack is not None
        self._draft_rows: tuple[tuple, object] | None = None
        self._lean_heads: _LeanHeadsOf | None = None
        self._head_logits_of: tuple[LeanHeads, object, HeadLogits] | None = None  # (heads, rows, call)
        positions = torch.arange(self.max_positions, device=self.device).unsqueeze(0)
        cos, sin = body.rotary_emb(self.embed[:1], positions)  # the model's own tables (any rope scaling)
        self.cos, self.sin = cos[0].to(self.dtype), sin[0].to(self.dtype)
        logger.info(
            "lean step: %s, %d layers, %s weights (%.0f MB, %s kernel), %s compute",
            type(model).__name__,
            len(self.layers),
            weights,
            self.nbytes / 1e6,
            "no" if weights == "dense" else self.kernel,
            self.dtype,
        )

    @property
    def nbytes(self) -> int:
        """Bytes of weights one step reads (linear layers and the output layer)."""
        linears = [lin for layer in self.layers for lin in (layer.qkv, layer.o, layer.gate_up, layer.down)]
        return sum(lin.nbytes for lin in linears) + self.output_layer.nbytes

    def _fused_stack(self):
        """All layers as one ``_core.LlamaStack`` when they are int4 on a kernel of ours whose
        attention the stack runs for this head size."""
        if self.weights != "int4" or self.kernel == "torch" or not _core.fused_step_runs(self.head_dim, self.kernel):
            return None
        layers = []
        for layer in self.layers:
            arrays = [
                a for lin in (layer.qkv, layer.o, layer.gate_up, layer.down) for a in (lin.codes, lin.scales, lin.mins)
            ]
            layers.append((*arrays, _bits(layer.attn_norm), _bits(layer.mlp_norm)))
        return _core.LlamaStack(
            self.hidden_size,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.intermediate,
            self.eps,
            layers,
            _bits(self.norm),
            self.kernel,
        )

    def new_cache(self, batch: int, capacity: int = INITIAL_CAPACITY) -> StaticCache:
        """An empty cache for ``batch`` rows."""
        return StaticCache(len(self.layers), batch, self.kv_heads, self.head_dim, capacity, self.dtype, self.device)

    def hidden(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None, cache: StaticCache):
        """Final normalised hidden states ``[B, T, d]`` of ``input_ids [B, T]`` at ``position_ids
        [B, T]``; the new keys/values are appended to ``cache``.

        ``attention_mask``: None or ``[B, T]`` (a prompt: causal, 0 marks padding) when the
        cache is empty; else the engine's additive ``[B, 1, T, length + T]`` mask."""
        with self._threads():
            return self._hidden(input_ids, position_ids, attention_mask, cache)

    def _hidden(self, input_ids, position_ids, attention_mask, cache):
        B, T = input_ids.shape
        if self._stack is not None:
            return self._pieces_hidden(input_ids, position_ids, self._mask(attention_mask, cache, B, T), cache)
        mask = self._mask(attention_mask, cache, B, T)
        # Quantized decoding steps group the query heads; dense steps and prompts keep enable_gqa,
        # transformers' own arithmetic (see _grouped_mask).
        grouped = T <= FUSED_TOKENS and self.weights != "dense"
        if grouped:
            mask = _grouped_mask(mask, self.heads // self.kv_heads)
        cache.reserve(T)
        cos = self.cos[position_ids].unsqueeze(2)  # [B, T, 1, hd]
        sin = self.sin[position_ids].unsqueeze(2)
        x = F.embedding(input_ids, self.embed)
        q_width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer.attn_norm, self.eps)
            qkv = layer.qkv(h)
            qk = qkv[..., : q_width + kv_width].view(B, T, self.heads + self.kv_heads, self.head_dim)
            qk = qk * cos + _rotate_half(qk) * sin
            q = qk[:, :, : self.heads].transpose(1, 2)
            k = qk[:, :, self.heads :].transpose(1, 2)
            v = qkv[..., q_width + kv_width :].view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            keys, values = cache.write(i, k, v)
            if grouped:
                q = q.reshape(B, self.kv_heads, -1, self.head_dim)
                attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            else:
                attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
            attn = attn.reshape(B, self.heads, T, self.head_dim)
            x = x + layer.o(attn.transpose(1, 2).reshape(B, T, q_width))
            h = _rms_norm(x, layer.mlp_norm, self.eps)
            gate, up = layer.gate_up(h).chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up)
        cache.advance(T)
        return _rms_norm(x, self.norm, self.eps)

    def _pieces_hidden(self, input_ids: Tensor, position_ids: Tensor, mask: Tensor, cache: StaticCache) -> Tensor:
        """The fused step over :data:`FUSED_TOKENS` tokens at a time, each piece attending to the
        cache (the pieces before it among them) through its rows of ``mask``.

        Why: the fused step computes every row independently of the others, so the pieces give
        one call's bits; a long prompt then runs 1.5-1.7x faster than through PyTorch's ops
        between our products (128-512 tokens of the default model, bench/RESULTS.md, the target
        step's item 20); pieces narrower than 64 tokens ran slower, wider ones no faster."""
        T, past = input_ids.shape[1], cache.length
        if T <= FUSED_TOKENS:
            return self._fused_hidden(input_ids, position_ids, mask, cache)
        pieces = []
        for start in range(0, T, FUSED_TOKENS):
            end = min(T, start + FUSED_TOKENS)
            rows = mask[:, :, start:end, : past + end]
            pieces.append(self._fused_hidden(input_ids[:, start:end], position_ids[:, start:end], rows, cache))
        return torch.cat(pieces, dim=1)

    def _fused_hidden(self, input_ids: Tensor, position_ids: Tensor, mask: Tensor, cache: StaticCache) -> Tensor:
        B, T = input_ids.shape
        cache.reserve(T)
        x = F.embedding(input_ids, self.embed).reshape(B * T, self.hidden_size).contiguous()
        cos = self.cos.index_select(0, position_ids.reshape(-1))  # [B * T, hd], faster than indexing
        sin = self.sin.index_select(0, position_ids.reshape(-1))
        rows = mask[:, 0].reshape(B * T, -1).contiguous()
        self._stack.forward(
            _bits(x),
            B,
            T,
            _bits(cos),
            _bits(sin),
            *cache.layer_bits(),
            cache.length,
            _bits(rows),
            _bits(normed := torch.empty_like(x)),  # the final norm, in the same call
            self._kernel_threads,
        )
        cache.advance(T)
        return normed.view(B, T, self.hidden_size)

    def logits(self, hidden: Tensor) -> Tensor:
        """float32 logits at ``hidden [..., d]``."""
        with self._threads():
            return self.output_layer(hidden.to(self.dtype)).float()

    def session(self):
        """A context for a whole decoding loop over this step (the engine enters it): PyTorch
        on one thread throughout, as inside each step (see :meth:`_threads`), so that the
        caller's own PyTorch ops between steps leave no OpenMP threads spinning against the
        step's thread pool. A no-op when no layer runs on our kernels."""
        return self._threads()

    @contextlib.contextmanager
    def _threads(self):
        """PyTorch on one thread while our kernels use its thread count.

        Why: when every linear layer runs on our kernels (a quantized step on x86), their thread
        pool and PyTorch's OpenMP pool would both spin on the same cores between calls, and
        each would wait for threads the other holds (a 12 ms step took 36 ms on 2 cores). The
        few small ops left to PyTorch (norms, rotary, attention) lose little on one thread."""
        if not self._lowbit or self._in_step:
            yield
            return
        threads = torch.get_num_threads()
        if threads != self._kernel_threads:
            extra = [] if self._draft_rows is None else [self._draft_rows[1]]
            lean = None if self._lean_heads is None else self._lean_heads.lean
            extra += [] if lean is None else lean.layers
            for lin in self._lowbit + [lin for lin in extra if _runs_our_kernel(lin)]:
                lin.threads = threads
            if self._head_logits_of is not None:
                self._head_logits_of[2].threads = threads
            self._kernel_threads = threads
        self._in_step = True
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            self._in_step = False

    def head_logits(self, heads, hidden: Tensor, next_ids: Tensor) -> Tensor:
        """float32 logits ``[..., h-1, V]`` of draft ``heads`` at ``hidden [..., d]`` where the target
        chose ``next_ids``: the heads' own layers, then this step's output layer in its format, or,
        for heads with a draft vocabulary, its rows of that vocabulary in ``draft_format`` (-inf
        elsewhere), as :meth:`draftlattice.hf.DraftHeads.logits` computes them through the
        model's."""
        with self._threads():
            return self._head_logits(heads, hidden, next_ids)

    def _head_logits(self, heads, hidden, next_ids):
        lean = self._heads_for(heads)
        vocab = heads.draft_vocab
        rows = self.output_layer if vocab is None else self._rows_for(vocab)
        if isinstance(lean, LeanHeads) and _runs_our_kernel(rows):
            return self._fused_head_logits(lean, rows, vocab)(hidden, next_ids)
        embeds = F.embedding(next_ids, self.embed) if heads.reads_next_token else None
        states = lean(hidden.to(self.dtype), embeds)
        part = rows(states.to(self.dtype)).float()
        if vocab is None:
            return part
        # float32, as the drafters read them: their conversion is then free, and scatter_ fills
        # the -inf logits faster than index_copy_ (90 against 150 us for 3 x 49,152).
        out = part.new_full((*part.shape[:-1], self.vocab_size), float("-inf"))
        return out.scatter_(-1, vocab.to(part.device).expand(part.shape), part)

    def _rows_for(self, vocab: Tensor):
        """The output layer's rows of draft vocabulary ``vocab`` in :attr:`draft_format`."""
        key = (vocab.data_ptr(), vocab.numel())
        if self._draft_rows is None or self._draft_rows[0] != key:
            rows = self._output_weight.detach().index_select(0, vocab.to(self.device))
            self._draft_rows = (key, make_linear(rows, self.draft_format, self.dtype, self.kernel))
            if _runs_our_kernel(self._draft_rows[1]):
                self._draft_rows[1].threads = self._kernel_threads
        return self._draft_rows[1]

    def _fused_head_logits(self, lean: LeanHeads, rows, vocab: Tensor | None) -> HeadLogits:
        """The heads' whole call in C++ (:class:`~.heads.HeadLogits`), kept while ``lean`` and
        ``rows`` are the current ones."""
        known = self._head_logits_of
        if known is None or known[0] is not lean or known[1] is not rows:
            embed = self.embed if lean.reads_next_token else None
            call = HeadLogits(lean, embed, rows, vocab, self.vocab_size)
            call.threads = self._kernel_threads
            known = self._head_logits_of = (lean, rows, call)
        return known[2]

    def _heads_for(self, heads):
        """``heads`` on our kernels (:class:`~.heads.LeanHeads`, rebuilt when their parameters
        change in place: an optimizer step, ``load_state_dict``) where this step's layers run on
        them and the heads fit, else ``heads`` themselves."""
        if not self._lowbit:
            return heads
        known = self._lean_heads
        if known is None or known.heads is not heads:
            # Their parameters are listed once: a module walk per step cost ~0.1 ms.
            known = _LeanHeadsOf(heads, list(heads.parameters()), None, None)
        versions = tuple(p._version for p in known.params)
        if known.versions != versions:
            lean = LeanHeads(heads, self.kernel) if LeanHeads.fits(heads) else None
            for layer in [] if lean is None else lean.layers:
                layer.threads = self._kernel_threads
            known = known._replace(versions=versions, lean=lean)
        self._lean_heads = known
        return heads if known.lean is None else known.lean

    def _mask(self, attention_mask: Tensor | None, cache: StaticCache, B: int, T: int) -> Tensor:
        if attention_mask is not None and attention_mask.ndim == 4:
            # The engine masks with its dtype's lowest value (decode.cache.additive_mask), which
            # a float16 model's -65504 is not in bf16: -inf, a key the fused attention skips.
            hidden = attention_mask <= torch.finfo(attention_mask.dtype).min
            return attention_mask.to(self.dtype).masked_fill(hidden, float("-inf"))
        if cache.length:
            raise ValueError("a lean step over a filled cache needs the engine's 4D mask")
        keys = torch.ones(B, T, dtype=torch.bool, device=self.device)
        if attention_mask is not None:
            keys = attention_mask.to(self.device).bool()
        block = torch.ones(T, T, dtype=torch.bool, device=self.device).tril() & keys.unsqueeze(1)
        return additive_mask(keys[:, :0], block, self.dtype)

    @torch.inference_mode()
    def greedy(self, input_ids: Tensor, max_new_tokens: int, eos_token_id: int | None = None) -> list[int]:
        """Plain greedy decoding of one prompt ``[1, P]``, one token per step: the format's own
        reference output (and its one-token step) for drafted decoding to agree with."""
        if input_ids.ndim != 2 or input_ids.shape[0] != 1:
            raise ValueError(f"greedy decodes one prompt [1, P], got shape {tuple(input_ids.shape)}")
        P = input_ids.shape[1]
        cache = self.new_cache(1, P + max_new_tokens)
        positions = torch.arange(P, device=self.device).unsqueeze(0)
        hidden = self.hidden(input_ids.to(self.device), positions, None, cache)
        out: list[int] = []
        for step in range(max_new_tokens):
            token = int(self.logits(hidden[0, -1]).argmax())
            out.append(token)
            if token == eos_token_id or step + 1 == max_new_tokens:
                break
            ids = torch.tensor([[token]], device=self.device)
            mask = torch.zeros(1, 1, 1, cache.length + 1, dtype=self.dtype, device=self.device)
            hidden = self.hidden(ids, torch.tensor([[P + step]], device=self.device), mask, cache)
        return out

    def fits(self, model) -> bool:
        """Whether ``model`` has this step's shapes (layers, hidden size, vocabulary): the model
        it was built from, or its twin."""
        weight = model.get_output_embeddings().weight
        shapes = (tuple(weight.shape), len(model.base_model.layers))
        return shapes == ((self.vocab_size, self.hidden_size), len(self.layers))


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """transformers' ``LlamaRMSNorm``: normalised in float32, cast back, then scaled."""
    return weight * F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)


def _bits(tensor: Tensor):
    """A bf16 tensor's bits as the C++ kernels read them (an int16 numpy view, no copy)."""
    return tensor.view(torch.int16).numpy()


def _runs_our_kernel(linear) -> bool:
    return linear.format != "dense" and linear.kernel != "torch"


def _grouped_mask(mask: Tensor, groups: int) -> Tensor:
    """``mask [B, 1, T, L]`` for queries grouped by key head: ``[B, 1, groups * T, L]``.

    Why: the query heads that share a key head attend as one ``groups * T``-row query (the
    same mathematics as ``enable_gqa``); PyTorch's CPU attention kernel then splits its work over
    rows instead of over tiny heads, 6x faster for one token (bench/RESULTS.md). The kernel
    blocks the longer query differently, so the last bits of some results differ from
    ``enable_gqa``'s: the dense step keeps transformers' arithmetic (its bf16 greedy outputs
    equal ``generate()``'s on the demo's 8 prompts, 4 of 8 when grouped), and prompts too."""
    B, _, T, L = mask.shape
    if T == 1 or groups == 1:
        return mask  # one row per query head broadcasts as it is
    return mask.unsqueeze(2).expand(B, 1, groups, T, L).reshape(B, 1, groups * T, L)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
