"""Blockwise decoding of a Hugging Face model equals its own greedy ``generate()``."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _hf_models import llama as tiny_llama
from draftlattice.decode import BlockwiseDecoder, Drafts, VanillaDrafter
from draftlattice.hf import HFBlockwiseLM

V = 40
pytestmark = pytest.mark.usefixtures("one_thread")


def llama():
    # LlamaConfig's own special tokens (bos 1, eos 2), unlike the shared factory's default.
    return tiny_llama(V, seed=0, num_attention_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2)


def gpt2():
    torch.manual_seed(1)
    cfg = GPT2Config(
        vocab_size=V, n_embd=32, n_layer=2, n_head=2, n_positions=128, bos_token_id=V - 1, eos_token_id=V - 1
    )
    return GPT2LMHeadModel(cfg).eval()


class PartlyRightDrafter:
    """p drafts that follow the known greedy continuation for a random number of tokens, then
    go wrong: acceptance, rejection and cache rollback all happen (the heads are untrained)."""

    name = "partly-right"

    def __init__(self, reference: list[int], p: int, seed: int = 0) -> None:
        self.reference, self.num_drafts = reference, p
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, head_logits, context):
        g = head_logits.shape[0]
        truth = torch.tensor(self.reference[len(context) : len(context) + g])
        rows = []
        for _ in range(self.num_drafts):
            right = int(torch.randint(g + 1, (), generator=self.generator))
            row = truth.clone()
            row[right:] = (row[right:] + 1 + torch.randint(V - 1, (g - right,), generator=self.generator)) % V
            rows.append(row)
        return Drafts(torch.unique(torch.stack(rows), dim=0, sorted=False))


def hf_greedy(model, prompt, new):
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


@pytest.mark.parametrize("make", [llama, gpt2])
@pytest.mark.parametrize(("verifier", "p"), [("greedy", 1), ("greedy", 3), ("tree", 3)])
def test_blockwise_output_equals_hf_generate(make, verifier, p):
    hf = make()
    model = HFBlockwiseLM(hf, num_heads=4)
    sizes = torch.zeros(5, dtype=torch.int64)
    for prompt in ([1, 2, 3], [7, 7, 7, 7, 7, 9]):
        expected = hf_greedy(hf, prompt, 16)
        drafter = PartlyRightDrafter(prompt + expected, p)
        result = BlockwiseDecoder(model, drafter, verifier).generate(prompt, 16)
        assert result.tokens == expected
        sizes[: len(result.stats.block_sizes)] += torch.tensor(result.stats.block_sizes)
    assert sizes[4] > 0 and sizes[1:4].sum() > 0, sizes.tolist()


def test_untrained_extra_heads_still_give_the_hf_output():
    hf = gpt2()
    model = HFBlockwiseLM(hf, num_heads=3)
    for head in model.heads:  # random heads: drafts are mostly rejected
        torch.nn.init.normal_(head.down.weight, std=0.5)
    assert BlockwiseDecoder(model, VanillaDrafter(), "tree").generate([5, 6], 12).tokens == hf_greedy(hf, [5, 6], 12)


def test_single_head_hf_model():
    hf = llama()
    result = BlockwiseDecoder(HFBlockwiseLM(hf), VanillaDrafter()).generate([4, 5], 6)
    assert result.tokens == hf_greedy(hf, [4, 5], 6)
    assert result.stats.serial_calls == 6
