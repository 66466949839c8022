"""The torch Verifier on real SmolLM2 weights (CPU), against the llama.cpp verifier:
token-probability formats, and value heads that read middle layers or run with a LoRA adapter (the
same features and scores as on llama.cpp, the adapter merged into the verifier's own weights only).

The LoRA adapters are GGUFs as llama.cpp's convert_lora_to_gguf.py writes them
(tests/smollm2_lora.py, through the export that made the shipped LoRA head: gguf's GGUFWriter,
`blk.N.<tensor>.weight.lora_a/_b`, general.type adapter, adapter.type lora, adapter.lora.alpha 8
over rank 4, so a scale of 2), and llama.cpp loads each one here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from smollm2_lora import lora_head

from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.llamacpp.layer_capture import LayerCapture
from edgereason.backends.llamacpp.runtime import KVContext
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.backends.torch.model import TorchDecoder
from edgereason.backends.torch.runtime import TorchContext
from edgereason.backends.torch.verifier import TorchVerifier
from edgereason.errors import ConfigError, ModelError
from edgereason.heads.backbone import feature_tokens, file_sha256
from edgereason.heads.value_head import Adapter, Backbone, ValueHead
from edgereason.prompts import solve_messages
from edgereason.protocols import ScoreRequest

Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?"
)
GOOD = [
    "In April she sold 48 clips.",
    "In May she sold 48 / 2 = 24 clips.",
    "Altogether 48 + 24 = 72 clips.",
    "The answer is 72.",
]
BAD = [
    "In April she sold 48 clips.",
    "In May she sold 48 * 2 = 96 clips.",
    "Altogether 48 + 96 = 144.",
]


def _score_twice(v) -> list[list[float]]:
    """Two calls as a search makes them: first steps under a shared question head, then grown
    paths."""
    first = v.score(
        [
            ScoreRequest("a", Q, GOOD[:2], [0, 1], "root", 0),
            ScoreRequest("b", Q, BAD[:2], [0, 1], "root", 0),
        ]
    )
    grown = v.score(
        [ScoreRequest("a2", Q, GOOD, [2, 3], "a", 2), ScoreRequest("b2", Q, BAD, [2], "b", 2)]
    )
    v.check_integrity()
    return [r.scores for r in first + grown]


@pytest.mark.parametrize("fmt", ["judge", "rlhflow"])
def test_scores_are_near_llamacpps(fmt, smollm2, torch_smollm2):
    """llama.cpp rounds activations to 8 bits, which moves SmolLM2's logits by up to ~0.7 (torch's
    are the dequantized weights' float32 logits); on these steps the scores differ by up to 0.035
    (judge), 0.01 (rlhflow), so the bound is 0.05. A prompt or readout mistake moves them by far
    more (a swapped Yes/No: ~0.5)."""
    llama = LlamaVerifier(smollm2, prm_format(fmt), 4096, flash_attn=False)
    try:
        want = _score_twice(llama)
    finally:
        llama.close()
    mine = TorchVerifier(torch_smollm2, prm_format(fmt), 4096)
    got = _score_twice(mine)
    deltas = [abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)]
    assert len(deltas) == 7 and max(deltas) < 0.05
    # the same cells held: the same prompts and reuse
    assert mine.kv_used_tokens == llama.kv_used_tokens


def test_a_grown_path_scores_as_from_scratch_and_costs_only_its_new_steps(torch_smollm2):
    v = TorchVerifier(torch_smollm2, prm_format("judge"), 4096)
    _score_twice(v)
    reused = v.score([ScoreRequest("a3", Q, GOOD + ["So 72."], [3, 4], "a2", 4)])[0]
    fresh = TorchVerifier(torch_smollm2, prm_format("judge"), 4096)
    scratch = fresh.score([ScoreRequest("x", Q, GOOD + ["So 72."], [3, 4])])[0]
    # matmuls of other shapes round otherwise
    assert reused.scores == pytest.approx(scratch.scores, abs=1e-3)
    assert reused.new_tokens < scratch.new_tokens / 3
    v.release("a")
    v.check_integrity()
    assert v.kv_used_tokens > 0  # b's path and the question head stay


def test_a_full_cache_drops_old_paths_and_rebuilds(torch_smollm2):
    v = TorchVerifier(torch_smollm2, prm_format("judge"), 300)
    _score_twice(v)
    v.score([ScoreRequest("c", Q + " Think.", GOOD[:3], [2], "root2", 0)])
    v.check_integrity()
    assert v.kv_used_tokens <= 300


def test_an_architecture_it_cannot_run_is_one_model_error(phi3_gguf):
    with pytest.raises(
        ModelError, match="phi3 model; the torch backend runs llama, qwen2: use --backend llamacpp"
    ):
        TorchDecoder(phi3_gguf, torch.device("cpu"))


def _llamacpp_scores(model, head) -> list[float]:
    v = LlamaVerifier(model, prm_format("head"), 4096, head=head, flash_attn=False)
    try:
        return [s for row in _score_twice(v) for s in row]
    finally:
        v.close()


def _torch_scores(model, head) -> list[float]:
    return [
        s
        for row in _score_twice(TorchVerifier(model, prm_format("head"), 4096, head=head))
        for s in row
    ]


def _layer_head(model, layers: tuple[int, ...]) -> ValueHead:
    """A random MLP head over 32 logits and the outputs of `layers`, standardised as training does
    it: each feature centred on llama.cpp's features of the test's paths, each block (the logits,
    each layer) scaled by one spread."""
    tokens = feature_tokens(model.n_vocab, 16, model.eog_ids)
    v = LlamaVerifier(
        model,
        prm_format("head"),
        4096,
        capture=LayerCapture(model.n_embd, model.n_layer, list(layers)),
    )
    try:
        requests = [ScoreRequest("a", Q, GOOD, [0, 1, 2, 3]), ScoreRequest("b", Q, BAD, [0, 1, 2])]
        feats = np.concatenate(v.features(requests, tokens))
    finally:
        v.close()
    k, d = len(tokens), feats.shape[1]
    blocks = [slice(0, k)] + [
        slice(k + i * model.n_embd, k + (i + 1) * model.n_embd) for i in range(len(layers))
    ]
    rng = np.random.default_rng(3)
    return ValueHead(
        Backbone("smollm2-135m", model.path.name, file_sha256(model.path)),
        tokens,
        feats.mean(axis=0).astype(np.float32),
        np.concatenate([np.full(s.stop - s.start, feats[:, s].std()) for s in blocks]).astype(
            np.float32
        ),
        rng.normal(size=(1, 8)).astype(np.float32),
        np.zeros(1, np.float32),
        (rng.normal(size=(8, d)) / np.sqrt(d)).astype(np.float32),
        np.zeros(8, np.float32),
        layers=layers,
    )


def test_a_head_that_reads_middle_layers_scores_as_on_llamacpp(smollm2, torch_smollm2):
    """Layers 15 then 6 after the logits, as llama.cpp's capture reads them ("l_out-<il>": a layer's
    output before any norm, at each step's last token). The scores agree within 0.02 (measured
    0.003: llama.cpp's 8-bit activation rounding, as in the other tests); the same head reading its
    layers in the other order moves them by ~0.17 (asserted: over 0.1), so the scores tell which
    states were read."""
    head = _layer_head(smollm2, (15, 6))
    want = _llamacpp_scores(smollm2, head)
    got = _torch_scores(torch_smollm2, head)
    assert len(got) == 7 and max(abs(a - b) for a, b in zip(got, want)) < 0.02
    swapped = _llamacpp_scores(smollm2, replace(head, layers=(6, 15)))
    assert max(abs(a - b) for a, b in zip(got, swapped)) > 0.1


def test_a_lora_head_scores_as_on_llamacpp(smollm2, torch_smollm2, tmp_path):
    """Scores of a random LoRA head (rank 4 on the attention projections, Q and K rows permuted as
    the converter permutes a llama model's) agree within 0.04 (measured 0.014: llama.cpp's 8-bit
    activation rounding, grown by the adapter's larger activations; on a float32 copy of the GGUF,
    where llama.cpp rounds no activations, a like adapter's scores agree within 0.0015). The adapter
    moves these scores by up to 0.66."""
    head, _ = lora_head(smollm2, tmp_path, scale=0.3, seed=1)
    want = _llamacpp_scores(smollm2, head)  # llama.cpp loads the adapter: ModelError otherwise
    got = _torch_scores(torch_smollm2, head)
    assert len(got) == 7 and max(abs(a - b) for a, b in zip(got, want)) < 0.04
    plain = _torch_scores(torch_smollm2, replace(head, adapter=None))
    assert max(abs(a - b) for a, b in zip(got, plain)) > 0.3


def _all_logits(ctx, tokens: list[int]) -> np.ndarray:
    rows: dict[int, np.ndarray] = {}
    ctx.decode(
        [DecodeItem(ctx.new_seq(), tokens, [(i, i) for i in range(len(tokens))])], rows.__setitem__
    )
    return np.stack([np.array(rows[i], dtype=np.float32) for i in range(len(tokens))])


def _llamacpp_logits(model, tokens: list[int], adapter=None) -> np.ndarray:
    ctx = KVContext(model, 1024, flash_attn=False)
    try:
        if adapter is not None:
            ctx.apply_lora(model.lora(adapter))
        return _all_logits(ctx, tokens)
    finally:
        ctx.close()


def test_a_lora_on_every_projection_moves_the_logits_as_on_llamacpp(
    smollm2, torch_smollm2, tmp_path
):
    """Every position's whole logits row, with an adapter on all seven projections (MLP too):
    torch's stay within 20% of the way the adapter moves llama.cpp's (RMS; measured 8%, llama.cpp's
    activation rounding: 0.46 against a move of 5.8; without the adapter the two differ by 0.23).
    Half the scale would leave about 50%, none 100%."""
    head, _ = lora_head(smollm2, tmp_path, scale=0.2, targets="all")
    text = smollm2.apply_chat_template(solve_messages(Q)) + "\n\n".join(GOOD)
    tokens = smollm2.tokenize(text, add_bos=smollm2.add_bos)
    plain = _llamacpp_logits(smollm2, tokens)
    adapted = _llamacpp_logits(smollm2, tokens, head.adapter.path)
    # the verifier's weights
    merged = TorchVerifier(torch_smollm2, prm_format("head"), 1024, head=head).model
    mine = _all_logits(TorchContext(merged, 1024, graphs=False), tokens)
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    assert rms(mine - adapted) < 0.2 * rms(adapted - plain)


def _tensors(decoder) -> list[torch.Tensor]:
    layers = [
        t for layer in decoder.layers for t in vars(layer).values() if isinstance(t, torch.Tensor)
    ]
    return [decoder.embed, decoder.output_norm, *layers]


def test_merging_an_adapter_leaves_the_generators_weights_as_they_were(
    smollm2, smollm2_path, tmp_path
):
    """Both roles on one GGUF (the generator's model is cached and shared): the verifier computes
    with its own merged copies of the adapted matrices and shares the rest; the generator's tensors
    are the same objects, never written (version counters, sums) and its logits are bit for bit what
    they were."""
    head, _ = lora_head(smollm2, tmp_path)
    torch_backend = load_backend("torch")
    generator = torch_backend.open_generator(smollm2_path, 1024, Placement())
    decoder = generator.model.decoder
    tensors = _tensors(decoder)
    versions, sums = [t._version for t in tensors], [float(t.double().sum()) for t in tensors]
    tokens = smollm2.tokenize(
        smollm2.apply_chat_template(solve_messages(Q)), add_bos=smollm2.add_bos
    )
    before = _all_logits(TorchContext(generator.model, 1024, graphs=False), tokens)

    verifier = torch_backend.open_verifier(PRMSpec(smollm2_path, "head", head), 1024, Placement())
    mine = verifier.model.decoder
    assert generator.model.decoder is decoder and mine is not decoder
    # not adapted
    assert mine.embed is decoder.embed and mine.layers[3].w_gate_up is decoder.layers[3].w_gate_up
    assert not torch.equal(mine.layers[3].wq, decoder.layers[3].wq)
    assert all(a is b for a, b in zip(_tensors(decoder), tensors, strict=True))
    assert [t._version for t in tensors] == versions and [
        float(t.double().sum()) for t in tensors
    ] == sums
    assert np.array_equal(
        _all_logits(TorchContext(generator.model, 1024, graphs=False), tokens), before
    )


def _write_adapter(path, arch: str, pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """A LoRA adapter GGUF of numpy (A [r, in], B [out, r]) pairs, the metadata convert_lora_to_gguf
    writes."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 8.0)
    for name, (a, b) in pairs.items():
        writer.add_tensor(f"{name}.lora_a", a)
        writer.add_tensor(f"{name}.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize(
    "arch, tensor, shapes, error, message",
    [
        (
            "llama",
            "token_embd.weight",
            ((49152, 4), (576, 4)),
            ConfigError,
            "token_embd.weight, which only the llama",
        ),
        (
            "llama",
            "output.weight",
            ((4, 576), (49152, 4)),
            ModelError,
            "which SmolLM2.* lacks: not its adapter",
        ),
        ("llama", "blk.0.attn_q.weight", ((4, 100), (576, 4)), ModelError, "do not fit"),
        (
            "qwen2",
            "blk.0.attn_q.weight",
            ((4, 576), (576, 4)),
            ModelError,
            "not a LoRA adapter of SmolLM2",
        ),
    ],
)
def test_an_adapter_it_cannot_merge_is_one_line(
    torch_smollm2, smollm2, smollm2_path, tmp_path, arch, tensor, shapes, error, message
):
    """What llama.cpp refuses too (another model's tensors, shapes or architecture) is a ModelError;
    what only llama.cpp applies (a LoRA of the token embeddings, A and B the other way round) a
    ConfigError that says so."""
    path = tmp_path / "other.lora.gguf"
    _write_adapter(path, arch, {tensor: tuple(np.zeros(s, np.float32) for s in shapes)})
    if error is ConfigError:
        smollm2.lora(path)  # llama.cpp loads it
    head = ValueHead(
        Backbone("smollm2-135m", smollm2_path.name, file_sha256(smollm2_path)),
        tokens=np.arange(4),
        mean=np.zeros(4, np.float32),
        std=np.ones(4, np.float32),
        w2=np.ones((1, 4), np.float32),
        b2=np.zeros(1, np.float32),
        adapter=Adapter(path.name, "", path),
    )
    with pytest.raises(error, match=message) as caught:
        TorchVerifier(torch_smollm2, prm_format("head"), 1024, head=head)
    assert "\n" not in str(caught.value)


def test_a_layer_head_of_another_depth_or_width_is_refused_in_one_line(torch_smollm2, smollm2_path):
    d = 2 * 576
    head = ValueHead(
        Backbone("smollm2-135m", smollm2_path.name, file_sha256(smollm2_path)),
        tokens=np.zeros(0, dtype=np.int64),
        mean=np.zeros(d, np.float32),
        std=np.ones(d, np.float32),
        w2=np.zeros((1, d), np.float32),
        b2=np.zeros(1, np.float32),
        layers=(6, 30),
    )
    with pytest.raises(
        ConfigError, match=r"reads layers \[6, 30\] of width 576, which .* \(30 layers of 576\)"
    ):
        TorchVerifier(torch_smollm2, prm_format("head"), 1024, head=head)
    with pytest.raises(ConfigError, match="of width 288"):
        TorchVerifier(
            torch_smollm2, prm_format("head"), 1024, head=replace(head, layers=(6, 10, 12, 14))
        )
