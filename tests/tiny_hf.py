"""Tiny random-initialised Hugging Face checkpoints for the torch verifier's tests, one per head
layout, built in the test and saved with save_pretrained (no hub): a byte-level BPE tokenizer with
ChatML, `<extra_0>` and the Math-Shepherd tag, and a 2-layer Qwen2 backbone."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from torch import nn
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2Model,
    Qwen2PreTrainedModel,
)

from edgereason.backends.prm_format import JUDGE_SYSTEM
from edgereason.backends.transformers.formats import QWEN_PRM_SYSTEM

Q = "Janet has 16 eggs and eats 3. How many are left?"
STEPS = [
    "Janet starts with 16 eggs.\n\n",
    "She eats 3, so 16 - 3 = 13.\n\n",
    "The answer is $\\boxed{13}$.",
]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TAG = " ки"


def tiny_tokenizer(extra_0: bool = True) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on a few strings (any text encodes), ChatML, `<extra_0>` and the "
    ки" tag."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    )
    tok.train_from_iterator([Q, *STEPS, QWEN_PRM_SYSTEM, JUDGE_SYSTEM] * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.add_tokens([AddedToken(TAG, normalized=False)])
    if extra_0:
        fast.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    fast.chat_template = CHATML
    return fast


def tiny_config(tokenizer) -> Qwen2Config:
    # a wide initializer: random scores that differ clearly from token to token, so a wrong position
    # shows
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.5,
        tie_word_embeddings=False,
    )


class QwenMathPRM(Qwen2PreTrainedModel):
    """Qwen2.5-Math-PRM's layout: the backbone under `model.`, the reward head under `score.`."""

    def __init__(self, config: Qwen2Config) -> None:
        super().__init__(config)
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))
        self.post_init()


class ValueHead(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.summary = nn.Linear(hidden, 1)


class SkyworkPRM(Qwen2ForCausalLM):
    """Skywork-o1-Open-PRM's layout: a causal LM with `v_head.summary` beside it."""

    def __init__(self, config: Qwen2Config) -> None:
        super().__init__(config)
        self.v_head = ValueHead(config.hidden_size)
        self.post_init()


def save(model, tokenizer, path):
    torch.manual_seed(0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_causal_lm(path: Path, seed: int = 0) -> Path:
    """A tiny causal LM folder (the judge, rlhflow and math-shepherd layout) at `path`."""
    torch.manual_seed(seed)
    tok = tiny_tokenizer()
    return save(Qwen2ForCausalLM(tiny_config(tok)).eval(), tok, path)
