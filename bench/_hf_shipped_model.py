"""The shipped blockwise model (lm_models/default) as a transformers model + DraftHeads folder.

The shipped ``BlockwiseLM`` (trained on WikiText-2, trunk and 8 heads jointly) is, layer for
layer, a GPT-NeoX decoder: pre-LayerNorm blocks with sequential residuals, a fused QKV
projection with biases, rotary embeddings on the full head width (half-split convention, base
10^4), a GELU MLP, a final LayerNorm and an output projection tied to the embedding. Only the
QKV rows need reordering (ours: [3, heads, d_head]; GPT-NeoX: [heads, 3, d_head]). Its heads 2..8
are residual heads on the final hidden state sharing that projection: the DraftHeads format.

:func:`convert` writes ``OUT/model`` (``GPTNeoXForCausalLM`` with the tokenizer) and
``OUT/heads`` and checks that the converted model's logits equal the original's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch


def convert(blockwise_dir: Path, out: Path) -> tuple[Path, Path]:
    from safetensors.torch import load_file
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, PreTrainedTokenizerFast

    import draftlattice.hf as dlhf
    from draftlattice.model.blockwise import BlockwiseLM

    cfg = json.loads((blockwise_dir / "config.json").read_text())
    state = {k: v.float() for k, v in load_file(str(blockwise_dir / "model.safetensors")).items()}
    d, H = cfg["d_model"], cfg["n_head"]
    config = GPTNeoXConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=d,
        num_hidden_layers=cfg["n_layer"],
        num_attention_heads=H,
        intermediate_size=cfg["d_ff"],
        hidden_act="gelu",
        max_position_embeddings=cfg["max_seq_len"],
        layer_norm_eps=cfg["layer_norm_eps"],
        use_parallel_residual=False,
        attention_bias=True,
        tie_word_embeddings=True,
        bos_token_id=cfg["eos_token_id"],
        eos_token_id=cfg["eos_token_id"],
        pad_token_id=cfg["eos_token_id"],
        rope_parameters={"rope_type": "default", "rope_theta": cfg["rope_base"], "partial_rotary_factor": 1.0},
    )
    model = GPTNeoXForCausalLM(config).eval()
    new = {
        "gpt_neox.embed_in.weight": state["embed.weight"],
        "lm_head.weight": state["embed.weight"],
        "gpt_neox.final_layer_norm.weight": state["ln_f.weight"],
        "gpt_neox.final_layer_norm.bias": state["ln_f.bias"],
    }
    for i in range(cfg["n_layer"]):
        src, dst = f"blocks.{i}.", f"gpt_neox.layers.{i}."
        qkv_w = state[src + "attn.qkv.weight"].view(3, H, d // H, d).transpose(0, 1).reshape(3 * d, d)
        qkv_b = state[src + "attn.qkv.bias"].view(3, H, d // H).transpose(0, 1).reshape(3 * d)
        new |= {
            dst + "input_layernorm.weight": state[src + "ln1.weight"],
            dst + "input_layernorm.bias": state[src + "ln1.bias"],
            dst + "post_attention_layernorm.weight": state[src + "ln2.weight"],
            dst + "post_attention_layernorm.bias": state[src + "ln2.bias"],
            dst + "attention.query_key_value.weight": qkv_w,
            dst + "attention.query_key_value.bias": qkv_b,
            dst + "attention.dense.weight": state[src + "attn.out.weight"],
            dst + "attention.dense.bias": state[src + "attn.out.bias"],
            dst + "mlp.dense_h_to_4h.weight": state[src + "mlp.0.weight"],
            dst + "mlp.dense_h_to_4h.bias": state[src + "mlp.0.bias"],
            dst + "mlp.dense_4h_to_h.weight": state[src + "mlp.2.weight"],
            dst + "mlp.dense_4h_to_h.bias": state[src + "mlp.2.bias"],
        }
    missing, unexpected = model.load_state_dict(new, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    if missing or unexpected:
        raise ValueError(f"conversion left missing {missing} unexpected {unexpected}")
    model_dir, heads_dir = out / "model", out / "heads"
    model.save_pretrained(model_dir)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(blockwise_dir / "tokenizer.json"), eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    tokenizer.save_pretrained(model_dir)
    # The same tokenizer, byte for byte, so the shipped LMs' recorded tokenizer hash matches.
    shutil.copyfile(blockwise_dir / "tokenizer.json", model_dir / "tokenizer.json")
    model.config.name_or_path = str(model_dir)
    heads = dlhf.DraftHeads.for_model(model, horizon=cfg["num_heads"], head_hidden=cfg["head_hidden"])
    heads.load_state_dict({k: v for k, v in state.items() if k.startswith("heads.")})
    heads.save_pretrained(heads_dir)

    original = BlockwiseLM.from_pretrained(blockwise_dir).eval()
    ids = torch.randint(0, cfg["vocab_size"], (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = original(ids).logits
        z = model.base_model(input_ids=ids).last_hidden_state
        got = torch.cat([model.lm_head(z).unsqueeze(2), heads.logits(z, model)], dim=2)
    error = float((expected - got).abs().max())
    if error > 1e-3:
        raise ValueError(f"converted model differs from the original: max |logit difference| {error}")
    return model_dir, heads_dir
