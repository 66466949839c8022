"""The two models as `memory-profile` measures them on torch (protocols.ProfiledGenerator /
ProfiledPRM), as backends/llamacpp/profiler_probes.py does on llama.cpp, with the torch backend's
numbers: KV bytes per token in its KV cache's dtype (f16 on the CPU, bf16 on CUDA), weights as
dequantized on the device (float32 on the CPU, bf16 on CUDA: not the GGUF file's size), decode and
prefill points measured on a TorchContext (measure.py), and the TorchGenerator and TorchVerifier of
the sample search.

A generator and a PRM of one file share one loaded model (model.load_model keeps one per file and
device), whose weights count once."""

from __future__ import annotations

from pathlib import Path

from edgereason.backends.interface import Placement
from edgereason.backends.prm_format import prm_format, prompt_for
from edgereason.backends.prompter import ModelPrompter
from edgereason.backends.torch import SEQ_SLOTS, open_model
from edgereason.backends.torch.generator import TorchGenerator
from edgereason.backends.torch.measure import measure_decode, measure_prefill
from edgereason.backends.torch.verifier import TorchVerifier, check_head
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import ProfiledGenerator, ProfiledPRM


def profiled_generator(path: Path, place: Placement) -> ProfiledGenerator:
    # sets torch's CPU threads: the decode points run with them
    model = open_model(path, place)
    return ProfiledGenerator(
        model.kv_bytes_per_token,
        model.decoder.weights_bytes(),
        SEQ_SLOTS,
        ModelPrompter(model),
        # whole rows: a torch session cuts no top-k on the device
        lambda rows, steps, _threads, progress, _top_k: measure_decode(
            model, rows, steps, progress
        ),
        lambda kv_tokens: TorchGenerator(model, kv_tokens),
    )


def profiled_prm(
    path: Path,
    same_as_generator: bool,
    fmt: str,
    head: ValueHead | None,
    place: Placement,
) -> ProfiledPRM:
    model = open_model(path, place)
    prompt = prm_format(fmt)
    # as the verifier
    ver_prompt = prompt_for(
        prompt, lambda msgs: model.apply_chat_template(msgs, add_assistant=True)
    )
    if head is not None:
        # now, not when the sample search opens the verifier after minutes of curves
        check_head(model, head)
    return ProfiledPRM(
        model.kv_bytes_per_token,
        0 if same_as_generator else model.decoder.weights_bytes(),
        lambda kv_tokens: TorchVerifier(model, prompt, kv_tokens, head=head),
        lambda q: len(model.tokenize(ver_prompt.head(q), add_bos=model.add_bos)),
        lambda points, reps, _threads, progress: measure_prefill(model, points, reps, progress),
    )
