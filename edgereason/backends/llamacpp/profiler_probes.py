"""The two models as `memory-profile` measures them on llama.cpp (protocols.ProfiledGenerator /
ProfiledPRM): KV bytes per token, weights on the device, throughput points, and the Generator and
Verifier of the sample search.

A llama.cpp PRM is a loaded LlamaModel; its weights are its GGUF file, counted once when the
generator's file serves both roles (load_model keeps one LlamaModel per file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgereason.backends.llamacpp.generator import LlamaGenerator
from edgereason.backends.llamacpp.measure import measure_decode, measure_prefill
from edgereason.backends.llamacpp.model import load_model
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format, prompt_for
from edgereason.backends.prompter import ModelPrompter
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import ProfiledGenerator, ProfiledPRM


def profiled_generator(path: Path, n_gpu_layers: int, n_threads: int | None) -> ProfiledGenerator:
    model = load_model(str(path), n_gpu_layers)

    def open_generator(kv_tokens: int) -> LlamaGenerator:
        return LlamaGenerator(model, kv_tokens, n_threads=n_threads, n_seq_max=SEQ_SLOTS)

    return ProfiledGenerator(
        model.kv_bytes_per_token,
        path.stat().st_size,
        SEQ_SLOTS,
        ModelPrompter(model),
        lambda rows, steps, threads, progress, top_k: measure_decode(
            model, rows, steps, threads, progress, top_k
        ),
        open_generator,
    )


def profiled_prm(
    path: Path,
    same_as_generator: bool,
    fmt: str,
    head: ValueHead | None,
    n_gpu_layers: int,
    n_threads: int | None,
) -> ProfiledPRM:
    model = load_model(str(path), n_gpu_layers)
    prompt = prm_format(fmt)
    # as the verifier
    ver_prompt = prompt_for(
        prompt, lambda msgs: model.apply_chat_template(msgs, add_assistant=True)
    )

    def open_verifier(kv_tokens: int) -> Any:
        return LlamaVerifier(model, prompt, kv_tokens, n_threads=n_threads, head=head)

    return ProfiledPRM(
        model.kv_bytes_per_token,
        0 if same_as_generator else path.stat().st_size,
        open_verifier,
        lambda q: len(model.tokenize(ver_prompt.head(q), add_bos=model.add_bos)),
        lambda points, reps, threads, progress: measure_prefill(
            model, points, reps, threads, progress
        ),
    )
