"""The torch/transformers verifier on tiny random-initialised checkpoints, one per head layout, built here and saved
with save_pretrained (no hub): each is loaded back through the project's loader and scored against the format's
reference computation, written out independently here (full text, one forward pass, the checkpoint's own rule
for where a step is read). fp32 on CPU: scoring step by step equals scoring whole to 1e-5 (the forward passes
differ only in matmul shapes)."""

from __future__ import annotations

import sys

import pytest
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from torch import nn
from transformers import (AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Qwen2Model,
                          Qwen2PreTrainedModel)

from edgereason.backends.prm_format import JUDGE_SYSTEM
from edgereason.backends.transformers import open_verifier
from edgereason.backends.transformers.formats import QWEN_PRM_SYSTEM
from edgereason.backends.transformers.loader import import_torch, kv_bytes_per_token, resolve_device
from edgereason.errors import ConfigError, ModelError
from edgereason.protocols import ScoreRequest

Q = "Janet has 16 eggs and eats 3. How many are left?"
STEPS = ["Janet starts with 16 eggs.\n\n", "She eats 3, so 16 - 3 = 13.\n\n", "The answer is $\\boxed{13}$."]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TAG = " ки"
EXACT = 1e-5


def tiny_tokenizer(extra_0: bool = True) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on a few strings (any text encodes), ChatML, `<extra_0>` and the " ки" tag."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator([Q, *STEPS, QWEN_PRM_SYSTEM, JUDGE_SYSTEM] * 3, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.add_tokens([AddedToken(TAG, normalized=False)])
    if extra_0:
        fast.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    fast.chat_template = CHATML
    return fast


def tiny_config(tokenizer) -> Qwen2Config:
    # a wide initializer: random scores that differ clearly from token to token, so a wrong position shows
    return Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
                       tie_word_embeddings=False)


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


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Folders of each layout: qwen-prm, skywork, a causal LM (math-shepherd, judge, rlhflow)."""
    torch.manual_seed(0)
    tok = tiny_tokenizer()
    root = tmp_path_factory.mktemp("hf")
    folders = {}
    for name, cls in (("qwen-prm", QwenMathPRM), ("skywork", SkyworkPRM), ("causal", Qwen2ForCausalLM)):
        model = cls(tiny_config(tok)).eval()
        folders[name] = (save(model, tok, root / name), model)
    return folders


def encode(tok, text: str, special: bool = False) -> list[int]:
    return tok.encode(text, add_special_tokens=special)


def reference(name: str, model, tok) -> list[float]:
    """Each format's scores of STEPS, computed the checkpoint's own way on the whole text."""
    steps = [s.strip() for s in STEPS]
    with torch.no_grad():
        if name == "qwen-prm":
            text = tok.apply_chat_template([{"role": "system", "content": QWEN_PRM_SYSTEM},
                                            {"role": "user", "content": Q},
                                            {"role": "assistant", "content": "<extra_0>".join(steps) + "<extra_0>"}],
                                           tokenize=False)
            ids = torch.tensor([encode(tok, text)])
            h = model.model(input_ids=ids).last_hidden_state[0]
            at = ids[0] == tok.convert_tokens_to_ids("<extra_0>")
            return torch.softmax(model.score(h[at]), -1)[:, 1].tolist()
        if name == "skywork":  # Skywork's prepare_input: BOS text + question + "\n", each step + the "\n" token
            nl = encode(tok, "\n")[-1]
            ids, flags = encode(tok, tok.bos_token + Q + "\n"), []
            for s in steps:
                ids += encode(tok, s) + [nl]
                flags.append(len(ids) - 1)
            h = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            return torch.sigmoid(model.v_head.summary(h[flags])[:, 0]).tolist()
        if name == "math-shepherd":  # question + " " + steps each followed by " ки", joined by "\n"
            ids = torch.tensor([encode(tok, Q + " " + "\n".join(s + TAG for s in steps), special=True)])
            logits = model(input_ids=ids).logits[0]
            at = ids[0] == encode(tok, TAG)[0]
            pair = logits[at][:, [encode(tok, "+")[0], encode(tok, "-")[0]]]
            return torch.softmax(pair, -1)[:, 0].tolist()
        # judge: P(Yes) vs P(No) at the open assistant turn after each step, on the chat template
        scores = []
        for k in range(1, len(steps) + 1):
            msgs = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": f"{Q} {steps[0]}"}]
            for s in steps[1:k]:
                msgs += [{"role": "assistant", "content": "Yes"}, {"role": "user", "content": s}]
            ids = torch.tensor([encode(tok, tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))])
            last = model(input_ids=ids).logits[0, -1]
            pair = last[[encode(tok, "Yes")[0], encode(tok, "No")[0]]]
            scores.append(torch.softmax(pair, -1)[0].item())
        return scores


LAYOUTS = [("qwen-prm", "qwen-prm"), ("skywork", "skywork"), ("math-shepherd", "causal"), ("judge", "causal")]


@pytest.mark.parametrize("fmt, layout", LAYOUTS)
def test_scores_match_the_formats_reference(checkpoints, fmt, layout):
    folder, model = checkpoints[layout]
    verifier = open_verifier(folder, fmt, kv_tokens=4096, device="cpu")
    scores = verifier.score([ScoreRequest("p", Q, STEPS, [0, 1, 2])])[0].scores
    expected = reference(fmt, model, AutoTokenizer.from_pretrained(folder))  # as the checkpoint loads it
    assert len(scores) == len(STEPS) and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == pytest.approx(expected, abs=EXACT)
    assert max(scores) - min(scores) > 1e-3  # the positions are told apart: the check above means something


@pytest.mark.parametrize("fmt, layout", LAYOUTS)
def test_step_by_step_equals_whole(checkpoints, fmt, layout):
    folder, _ = checkpoints[layout]
    verifier = open_verifier(folder, fmt, kv_tokens=4096, device="cpu")
    incremental = []
    for k in range(len(STEPS)):
        prefix = f"p{k - 1}" if k else "root"
        res = verifier.score([ScoreRequest(f"p{k}", Q, STEPS[:k + 1], [k], prefix, k)])[0]
        incremental += res.scores
        assert res.new_tokens == len(verifier.tokens.segments(STEPS, k)[0])  # only the new step was evaluated
    whole = open_verifier(folder, fmt, kv_tokens=4096, device="cpu").score(
        [ScoreRequest("whole", Q, STEPS, [0, 1, 2])])[0].scores
    assert incremental == pytest.approx(whole, abs=EXACT)
    verifier.check_integrity()


def test_paths_share_their_questions_head_and_a_held_path_serves_a_shorter_prefix(checkpoints):
    folder, _ = checkpoints["causal"]
    verifier = open_verifier(folder, "judge", kv_tokens=4096, device="cpu")
    head = len(verifier.tokens.head(Q))
    first = verifier.score([ScoreRequest(f"s{i}", Q, [f"Step {i}."], [0], "root", 0) for i in range(3)])
    assert verifier.stats.tokens == head + sum(r.new_tokens for r in first)
    two = verifier.score([ScoreRequest("two", Q, STEPS[:2], [0, 1])])[0]
    again = verifier.score([ScoreRequest("one", Q, STEPS[:1], [0], "two", 1)])[0]
    assert again.new_tokens == 0 and again.scores == [two.scores[0]]
    verifier.check_integrity()


def test_lru_drops_held_paths_under_memory_pressure(checkpoints):
    folder, _ = checkpoints["causal"]
    verifier = open_verifier(folder, "judge", kv_tokens=700, device="cpu")
    scores = [verifier.score([ScoreRequest(f"k{i}", Q, [STEPS[0], f"Step variant {i}."], [1])])[0].scores
              for i in range(8)]  # each path is about 200 tokens: they cannot all be held
    assert verifier.kv_used_tokens <= verifier.kv_capacity_tokens and len(verifier._held) < 8
    rebuilt = verifier.score([ScoreRequest("k0", Q, [STEPS[0], "Step variant 0."], [1], "k0", 2)])[0]
    assert rebuilt.scores == pytest.approx(scores[0], abs=EXACT)  # dropped, rebuilt from scratch, same score
    verifier.check_integrity()


def test_kv_bytes_per_token_comes_from_the_config(checkpoints):
    folder, _ = checkpoints["qwen-prm"]
    assert kv_bytes_per_token(folder, "cpu") == 2 * 2 * 2 * (32 // 4) * 4  # K+V, layers, KV heads, head dim, fp32
    assert open_verifier(folder, "qwen-prm", 4096, device="cpu").kv_bytes_per_token == 256


# -- bad input: one clear line each --------------------------------------------------------------------------

def one_line(e: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelError) as e:
        open_verifier(tmp_path, "qwen-prm", 4096, device="cpu")
    assert "config.json" in one_line(e)


def test_a_format_the_checkpoint_does_not_have(checkpoints):
    with pytest.raises(ModelError) as e:  # a causal LM has no reward head
        open_verifier(checkpoints["causal"][0], "qwen-prm", 4096, device="cpu")
    assert "score.0.weight" in one_line(e)
    with pytest.raises(ModelError) as e:
        open_verifier(checkpoints["qwen-prm"][0], "skywork", 4096, device="cpu")
    assert "v_head.summary.weight" in one_line(e)


def test_a_tokenizer_without_extra_0(checkpoints, tmp_path):
    folder = save(QwenMathPRM(tiny_config(tiny_tokenizer())), tiny_tokenizer(extra_0=False), tmp_path / "m")
    with pytest.raises(ModelError) as e:
        open_verifier(folder, "qwen-prm", 4096, device="cpu")
    assert "<extra_0>" in one_line(e)


def test_torch_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(ConfigError) as e:
        import_torch()
    assert 'pip install "edgereason[torch]"' in one_line(e)


def test_cuda_requested_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as e:
        resolve_device("cuda")
    assert "sees no CUDA device" in one_line(e)


@pytest.mark.parametrize("argv, says", [
    (["--prm", "hf:/no/such/folder", "--prm-format", "qwen-prm"], "PRM checkpoint not found: /no/such/folder"),
    (["--prm-format", "skywork"], "--prm hf:FOLDER"),  # a reward-head format on llama.cpp
])
def test_cli_says_it_in_one_line(argv, says, capsys, smollm2_path):
    from edgereason.cli.main import main

    rc = main(["solve", "What is 2+3?", "--model", str(smollm2_path), *argv])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc != 0 and len(err) == 1 and says in err[0], err
