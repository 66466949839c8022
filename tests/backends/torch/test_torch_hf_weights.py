"""Hugging Face folders read by the torch backend's decoder, against transformers' own forward pass
on the same folder: tiny random llama and qwen2 checkpoints (q/k/v biases, tied and untied output
matrices, the rope scalings the backend computes, in transformers 5's config layout and the older
one) saved with save_pretrained; and the one-line refusals of what it does not compute."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from edgereason.backends import Placement, load_backend
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.errors import ModelError
from tests.tiny_hf import STEPS, Q, tiny_tokenizer

SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}
# strong enough over a 60-token prompt that leaving a scaling out moves the logits: with head_dim 8,
# every wavelength past 16 tokens is divided (llama3), or every one (linear)
LLAMA3 = {
    "rope_type": "llama3",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}
LINEAR = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}
DEFAULT = {"rope_type": "default", "rope_theta": 1000.0}


def save_random(folder, arch: str, rope: dict, tied: bool):
    """A random checkpoint: every weight drawn (biases and norms too), so a tensor read in the wrong
    place shows."""
    tokenizer = tiny_tokenizer()
    config_type, model_type = (
        (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    )
    config = config_type(
        vocab_size=len(tokenizer), rope_parameters=dict(rope), tie_word_embeddings=tied, **SHAPE
    )
    model = model_type(config)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(
                1 + 0.2 * torch.randn_like(p)
                if name.endswith("norm.weight")
                else 0.3 * torch.randn_like(p)
            )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def as_older_config(folder) -> None:
    """config.json as transformers 4 wrote it: `rope_theta` and `rope_scaling` in place of
    `rope_parameters`."""
    path = folder / "config.json"
    settings = json.loads(path.read_text())
    rope = settings.pop("rope_parameters")
    settings["rope_theta"] = rope.pop("rope_theta")
    settings["rope_scaling"] = None if rope["rope_type"] == "default" else rope
    path.write_text(json.dumps(settings))


def prompt(model: TorchModel) -> list[int]:
    messages = [{"role": "user", "content": Q}, {"role": "assistant", "content": "".join(STEPS)}]
    return model.tokenize(model.apply_chat_template(messages), add_bos=model.add_bos)


def decoder_logits(model: TorchModel, ids: list[int]) -> torch.Tensor:
    """The decoder's logits at every position, attention in float32 over the one sequence: the KV
    context keeps K and V in f16 on the CPU (as llama.cpp), which moves these logits by up to 0.03;
    this isolates the weights, their layout and the rope, which transformers matches to 2e-5."""

    def attention(q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        heads = [x.transpose(0, 1) for x in (q, *kv.chunk(2, dim=1))]
        return (
            F.scaled_dot_product_attention(*heads, is_causal=True, enable_gqa=True)
            .transpose(0, 1)
            .flatten(1)
        )

    tokens = torch.tensor(ids)
    return model.decoder.logits(
        model.decoder.hidden(tokens, torch.arange(len(ids)), lambda layer: attention)
    )


def context_logits(model: TorchModel, ids: list[int]) -> torch.Tensor:
    ctx = TorchContext(model, 512)
    _, logits = ctx.forward([DecodeItem(ctx.new_seq(), ids, [(i, i) for i in range(len(ids))])])
    ctx.close()
    return logits


@pytest.mark.parametrize(
    "arch, rope, tied, older",
    [
        ("qwen2", DEFAULT, True, False),
        ("qwen2", DEFAULT, False, True),
        ("llama", LLAMA3, False, False),
        ("llama", LLAMA3, True, True),
        ("llama", LINEAR, False, True),
    ],
    ids=[
        "qwen2-tied",
        "qwen2-older-config",
        "llama3-rope",
        "llama3-rope-older-config",
        "linear-rope",
    ],
)
def test_logits_equal_transformers_on_the_same_folder(tmp_path, arch, rope, tied, older):
    folder = save_random(tmp_path / arch, arch, rope, tied)
    if older:
        as_older_config(folder)
    model = TorchModel(folder, torch.device("cpu"))
    ids = prompt(model)
    assert len(ids) > 40
    reference = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, local_files_only=True
    )
    with torch.no_grad():
        want = reference(torch.tensor([ids])).logits[0]
    assert want.std() > 1.0  # logits that differ clearly from token to token
    torch.testing.assert_close(decoder_logits(model, ids), want, atol=1e-4, rtol=1e-5)
    # the f16 KV's rounding
    torch.testing.assert_close(context_logits(model, ids), want, atol=0.05, rtol=0)


@pytest.fixture()
def tiny_llama(tmp_path):
    return save_random(tmp_path / "tiny-llama", "llama", DEFAULT, tied=False)


def edit_config(folder, **changes) -> None:
    path = folder / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def refusal(folder) -> str:
    """The ModelError the torch backend's start-up check gives for `folder` (one line)."""
    with pytest.raises(ModelError) as e:
        load_backend("torch").kv_bytes_per_token(folder, Placement())
    assert "\n" not in str(e.value)
    return str(e.value)


def test_an_architecture_it_does_not_run_is_one_line_naming_what_runs(tiny_llama):
    edit_config(tiny_llama, model_type="phi3")
    assert "names a phi3 model; the torch backend runs llama, qwen2" in refusal(tiny_llama)


def test_a_rope_scaling_it_does_not_compute_is_one_line(tiny_llama):
    edit_config(
        tiny_llama, rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    )
    assert (
        "scales its rotary positions (yarn); the torch backend computes default, linear, llama3"
        in refusal(tiny_llama)
    )


def test_quantized_weights_and_unknown_tensors_are_one_line(tiny_llama, tmp_path):
    edit_config(tiny_llama, quantization_config={"quant_method": "gptq"})
    assert "gptq weights; the torch backend reads float safetensors" in refusal(tiny_llama)
    biased = save_random(tmp_path / "biased", "llama", DEFAULT, tied=False)
    # the saved weights stay unbiased: make a checkpoint that has them
    edit_config(biased, attention_bias=True)
    model = LlamaForCausalLM.from_pretrained(biased, local_files_only=True)
    model.save_pretrained(biased)
    assert (
        "has the tensor model.layers.0.self_attn.o_proj.bias, which the torch backend does not "
        "compute" in (refusal(biased))
    )


def test_a_folder_without_safetensors_is_one_line(tiny_llama, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(tiny_llama / "config.json", bare / "config.json")
    assert f"{bare} has no *.safetensors weights" in refusal(bare)
    (bare / "model.safetensors").write_bytes(b"not a header" * 8)
    assert "model.safetensors: not a safetensors file" in refusal(bare)
    (tiny_llama / "model.safetensors").unlink()
    (tiny_llama / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "model-1.safetensors"}})
    )
    assert (
        "the shard model-1.safetensors that model.safetensors.index.json lists is missing"
        in refusal(tiny_llama)
    )
