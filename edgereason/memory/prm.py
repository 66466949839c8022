"""The PRM as the memory profiler sees it, on either backend: its KV bytes per token, its weights on the device, its
prefill curve, a verifier for the sample search and the length of a question's head.

Rules:
- A llama.cpp PRM is a loaded LlamaModel; its weights are its GGUF file (counted once when the generator's file
  serves both roles, see device.weights_bytes).
- An `hf:` PRM runs on torch on the profiled device (CUDA for `--device gpu`, the CPU for `--device cpu`), so the
  split covers its KV and its weights as they load there (bf16 on a GPU, fp32 on the CPU). It is opened once: the
  prefill passes and the sample search share it (the passes hold nothing and leave its stats alone).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from edgereason.backends.llamacpp.measure import FILLER, Curve, Progress, measure_prefill, prefill_curve, prefill_rows
from edgereason.heads.value_head import ValueHead

TORCH_DEVICE = {"cpu": "cpu", "gpu": "cuda"}  # profiled device kind -> where the hf: PRM runs


@dataclass(frozen=True)
class ProfiledPRM:
    bytes_per_token: int
    weights_bytes: int  # on the device, besides the generator's (0 when the generator's weights serve both)
    open_verifier: Callable[[int], Any]  # KV tokens -> a Verifier for the sample search; the caller closes it
    head_tokens: Callable[[str], int]  # question -> tokens of its head (no KV cache needed: checked before measuring)
    measure: Callable[[Sequence[int], int, int | None, Progress | None], Curve]  # the prefill curve


def llama_prm(model: Any, path: Path, same_as_generator: bool, fmt: str, head: ValueHead | None,
              n_threads: int | None) -> ProfiledPRM:
    from edgereason.backends.llamacpp import LlamaVerifier
    from edgereason.backends.prm_format import prm_format, prompt_for

    prompt = prm_format(fmt)
    ver_prompt = prompt_for(prompt, lambda msgs: model.apply_chat_template(msgs, add_assistant=True))  # as the verifier

    def open_verifier(kv_tokens: int) -> Any:
        return LlamaVerifier(model, prompt, kv_tokens, n_threads=n_threads, head=head)

    return ProfiledPRM(model.kv_bytes_per_token, 0 if same_as_generator else path.stat().st_size, open_verifier,
                       lambda q: len(model.tokenize(ver_prompt.head(q), add_bos=model.add_bos)),
                       lambda points, reps, threads, progress: measure_prefill(model, points, reps, threads,
                                                                              progress))


def torch_prm(path: Path, fmt: str, head: ValueHead | None, device_kind: str, kv_tokens: int,
              n_threads: int | None) -> ProfiledPRM:
    """An hf: PRM opened on the profiled device with room for `kv_tokens` (the sample search's)."""
    from edgereason.backends import transformers as tf

    device = TORCH_DEVICE[device_kind]
    verifier = tf.open_verifier(path, fmt, kv_tokens, device=device, head=head, n_threads=n_threads)
    filler = verifier.tokens.encode(FILLER)

    def one_call(b: int) -> float:
        rows = prefill_rows(filler, b)
        t0 = time.perf_counter()
        verifier.prefill_pass(rows)
        return time.perf_counter() - t0

    return ProfiledPRM(verifier.kv_bytes_per_token, tf.weights_bytes(path, device), lambda _kv: verifier,
                       lambda q: len(verifier.tokens.head(q)),
                       lambda points, reps, _threads, progress: prefill_curve(one_call, points, reps, progress))
