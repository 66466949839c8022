"""llama.cpp backend: `open_models` builds a Generator and a Verifier, sharing weights when both
name one GGUF; backend.py puts it behind the one interface (LlamaCppBackend)."""

from __future__ import annotations

from pathlib import Path

from edgereason.backends.llamacpp.generator import LlamaGenerator
from edgereason.backends.llamacpp.model import LlamaModel, load_model, physical_cores
from edgereason.backends.llamacpp.profiler_probes import profiled_generator, profiled_prm
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import prm_format
from edgereason.heads.value_head import ValueHead


def open_models(
    generator_path: Path,
    prm_path: Path,
    prm_format_name: str,
    generator_kv_tokens: int,
    verifier_kv_tokens: int,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    flash_attn: bool = True,
    head: ValueHead | None = None,
    device_top_k: int = 0,
) -> tuple[LlamaGenerator, LlamaVerifier]:
    """head: the trained value head the `head` format reads (its backbone is prm_path). device_top_k
    > 0: the generator's rows are cut to their top k on the device (device_sampling.py). A value
    head on the generator's own weights reads the generator's context where its rows come back whole
    (LlamaVerifier)."""
    gen_model = load_model(str(generator_path), n_gpu_layers)
    prm_model = load_model(str(prm_path), n_gpu_layers)
    generator = LlamaGenerator(
        gen_model,
        generator_kv_tokens,
        n_threads=n_threads,
        flash_attn=flash_attn,
        device_top_k=device_top_k,
    )
    verifier = LlamaVerifier(
        prm_model,
        prm_format(prm_format_name),
        verifier_kv_tokens,
        n_threads=n_threads,
        flash_attn=flash_attn,
        head=head,
        generator_ctx=generator.ctx,
    )
    return generator, verifier


def open_generator(
    generator_path: Path,
    generator_kv_tokens: int,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    flash_attn: bool = True,
    device_top_k: int = 0,
) -> LlamaGenerator:
    """The generator alone, for a PRM on another backend (an hf: PRM on torch) in the same
    process."""
    return LlamaGenerator(
        load_model(str(generator_path), n_gpu_layers),
        generator_kv_tokens,
        n_threads=n_threads,
        flash_attn=flash_attn,
        device_top_k=device_top_k,
    )


def open_verifier(
    prm_path: Path,
    prm_format_name: str,
    verifier_kv_tokens: int,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    flash_attn: bool = True,
    head: ValueHead | None = None,
) -> LlamaVerifier:
    """The PRM alone, beside a generator on another backend (served generators and a value head
    here)."""
    return LlamaVerifier(
        load_model(str(prm_path), n_gpu_layers),
        prm_format(prm_format_name),
        verifier_kv_tokens,
        n_threads=n_threads,
        flash_attn=flash_attn,
        head=head,
    )


__all__ = [
    "SEQ_SLOTS",
    "profiled_generator",
    "profiled_prm",
    "LlamaGenerator",
    "LlamaVerifier",
    "LlamaModel",
    "load_model",
    "open_generator",
    "open_models",
    "open_verifier",
    "physical_cores",
]
