"""A fine-tuned verifier exported for llama.cpp: GGUF names, the readout moved onto token logits,
and the adapter run by llama.cpp as torch runs the same LoRA (real SmolLM2)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.lab.lora_export import gguf_weight_name, readout_on_tokens


def test_attention_and_mlp_projections_get_llamacpp_tensor_names():
    assert gguf_weight_name("model.layers.3.self_attn.q_proj") == "blk.3.attn_q.weight"
    assert gguf_weight_name("layers.12.self_attn.o_proj") == "blk.12.attn_output.weight"
    assert gguf_weight_name("layers.0.self_attn.v_proj") == "blk.0.attn_v.weight"
    assert gguf_weight_name("model.layers.7.mlp.gate_proj") == "blk.7.ffn_gate.weight"
    assert gguf_weight_name("model.layers.7.mlp.down_proj") == "blk.7.ffn_down.weight"
    for other in (
        "model.layers.0.mlp.q_proj",
        "model.layers.0.self_attn.up_proj",
        "model.embed_tokens",
    ):
        with pytest.raises(ValueError, match="attention and MLP projections only"):
            gguf_weight_name(other)


def test_a_readout_of_the_hidden_state_becomes_the_same_readout_of_token_logits():
    rng = np.random.default_rng(0)
    # 32 tokens' output rows over a 16-wide state
    rows, v = rng.normal(size=(32, 16)), rng.normal(size=16)
    u = readout_on_tokens(rows, v)
    h = rng.normal(size=(5, 16))
    assert (h @ rows.T) @ u == pytest.approx(h @ v, rel=1e-4)  # u . logits == v . h for any state
    with pytest.raises(ValueError, match="do not span"):
        readout_on_tokens(rows[:, :4] @ rng.normal(size=(4, 16)), v)  # rank 4: no exact readout


@pytest.mark.slow
# the MLP's LoRA at a smaller scale: random weights of the attention's scale on every projection
# move the readout so far (4.1) that 4-bit rounding alone puts the two sides 0.8 apart
@pytest.mark.parametrize("targets, scale", [("attention", 0.5), ("all", 0.2)])
def test_llamacpp_runs_the_exported_head_as_torch_runs_the_lora(
    smollm2, smollm2_path, tmp_path, targets, scale
):
    """The same random LoRA and readout in torch (the lab's add_lora on the GGUF read by
    transformers) and on llama.cpp (the exported adapter and head) score the same steps alike, and
    far from the backbone without it: the adapter's names, shapes, transposition and alpha / r scale
    all match, on the MLP's projections too."""
    import torch
    from smollm2_lora import lora_head

    from benchmarks.lab.lora import add_lora
    from edgereason.backends.llamacpp import LlamaVerifier
    from edgereason.backends.prm_format import PRM_FORMATS
    from edgereason.backends.transformers.loader import load_checkpoint
    from edgereason.protocols import ScoreRequest

    head, tensors = lora_head(smollm2, tmp_path, scale=scale, targets=targets)
    q = "Janet has 16 eggs and eats 3. How many are left?"
    steps = [
        "Janet starts with 16 eggs.\n\n",
        "She eats 3, so 16 - 3 = 13.\n\n",
        "The answer is $\\boxed{13}$.",
    ]
    v = LlamaVerifier(smollm2, PRM_FORMATS["head"], kv_tokens=4096, flash_attn=False, head=head)
    ours = v.score([ScoreRequest("p", q, steps, [0, 1, 2])])[0].scores
    pieces = [v.prompt.head(q), *v.prompt.segments(steps, 0)]
    v.close()

    ck = load_checkpoint(smollm2_path, "judge", device="cpu")
    ids, ends = [], []
    for i, text in enumerate(pieces):  # the verifier's own tokens, piece by piece
        ids += smollm2.tokenize(text, add_bos=not i and smollm2.add_bos, special=True)
        ends.append(len(ids) - 1)
    value = torch.as_tensor(tensors["value.weight"][0])

    def torch_logits() -> np.ndarray:
        with torch.no_grad():
            h = ck.backbone(input_ids=torch.as_tensor([ids])).last_hidden_state[0, ends[1:]].float()
        return (h @ value + float(tensors["value.bias"][0])).numpy()

    plain = torch_logits()
    with torch.no_grad():
        for name, p in add_lora(ck.backbone, rank=4, alpha=8.0, targets=targets):
            p.copy_(torch.as_tensor(tensors["model." + name]))
    adapted = torch_logits()
    ours = np.log(np.asarray(ours) / (1 - np.asarray(ours)))  # the head's pre-sigmoid value
    # llama.cpp multiplies 4-bit weights with 8-bit activations, torch dequantized weights with fp32
    # ones: without the adapter the readouts differ by 0.11 at most here, with it by 0.24
    # (attention) and 0.10 (all, measured) while it moves them by 2.2 and 1.5; a wrong name,
    # transposition, q/k row order or scale is off by about as much as the adapter moves them, and
    # the MLP's LoRA missing on one side by 0.47 (measured)
    shift = np.abs(adapted - plain).max()
    assert shift > 1.0
    assert np.abs(ours - adapted).max() < 0.2 * shift
