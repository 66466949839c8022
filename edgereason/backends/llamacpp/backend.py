"""The llama.cpp backend behind the one interface (backends/interface.py): both roles, on the CPU or
offloaded to a GPU by layers, measured by memory-profile and by --policy auto."""

from __future__ import annotations

from pathlib import Path

import llama_cpp.llama_cpp as L

from edgereason.backends.cxx_runtime import REBUILD
from edgereason.backends.interface import (
    BOTH_ROLES,
    Backend,
    Capabilities,
    OnDisk,
    Placement,
    PRMSpec,
)
from edgereason.backends.llamacpp import profiler_probes
from edgereason.backends.llamacpp.generator import LlamaGenerator
from edgereason.backends.llamacpp.measure import measure_decode
from edgereason.backends.llamacpp.model import load_model
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS, KVContext
from edgereason.backends.llamacpp.verifier import LlamaVerifier
from edgereason.backends.prm_format import PRM_FORMATS, prm_format
from edgereason.protocols import Generator, Points, ProfiledGenerator, ProfiledPRM, Verifier


class LlamaCppBackend(Backend):
    name = "llamacpp"
    capabilities = Capabilities(
        roles=BOTH_ROLES,
        profiles=BOTH_ROLES,
        measures_decode=True,
        seq_slots=SEQ_SLOTS,
        prm_formats=tuple(PRM_FORMATS),
    )

    def supports_gpu(self) -> bool:
        return bool(L.llama_supports_gpu_offload())

    def no_gpu_reason(self) -> str:
        return f"this llama-cpp-python build has no GPU support; reinstall it: {REBUILD}"

    def on_gpu(self, place: Placement) -> bool:
        return place.n_gpu_layers > 0

    def check_architecture(self, path: Path) -> None:
        """Nothing to read beforehand: llama.cpp says what it cannot load when it loads it."""

    def check_servers(self, place: Placement, model: str, prm: str, on_disk: OnDisk) -> None:
        """No servers: the models run here."""

    def kv_bytes_per_token(self, path: Path, place: Placement) -> int:
        return load_model(str(path), place.n_gpu_layers).kv_bytes_per_token

    def weights_bytes(self, path: Path, place: Placement) -> int:
        """The GGUF's size: llama.cpp keeps the weights as the file holds them."""
        return Path(path).stat().st_size

    def open_models(
        self, generator: Path, prm: PRMSpec, kv_tokens: tuple[int, int], place: Placement
    ) -> tuple[Generator, Verifier]:
        """A value head on the generator's own weights reads the generator's context where its rows
        come back whole (LlamaVerifier)."""
        for path in (generator, prm.path):  # both weights load before either KV context is made
            load_model(str(path), place.n_gpu_layers)
        gen = self.open_generator(generator, kv_tokens[0], place)
        return gen, _verifier(prm, kv_tokens[1], place, generator_ctx=gen.ctx)

    def open_generator(self, path: Path, kv_tokens: int, place: Placement) -> LlamaGenerator:
        """device_top_k > 0: the rows are cut to their top k on the device (device_sampling.py)."""
        return LlamaGenerator(
            load_model(str(path), place.n_gpu_layers),
            kv_tokens,
            n_threads=place.n_threads,
            flash_attn=place.flash_attn,
            device_top_k=place.device_top_k,
        )

    def open_verifier(self, prm: PRMSpec, kv_tokens: int, place: Placement) -> Verifier:
        return _verifier(prm, kv_tokens, place)

    def decode_points(
        self, generator: Generator, rows: tuple[int, ...], steps: int, n_threads: int | None
    ) -> Points | None:
        """None for a generator that is not llama.cpp's own (a served one beside a local PRM)."""
        if not isinstance(generator, LlamaGenerator):
            return None
        return measure_decode(generator.model, rows, steps, n_threads)

    def profiled_generator(self, path: Path, place: Placement) -> ProfiledGenerator:
        return profiler_probes.profiled_generator(path, place.n_gpu_layers, place.n_threads)

    def profiled_prm(
        self,
        prm: PRMSpec,
        place: Placement,
        same_as_generator: bool,
        kv_tokens: int,
    ) -> ProfiledPRM:
        layers, threads = place.n_gpu_layers, place.n_threads
        shared = same_as_generator
        return profiler_probes.profiled_prm(prm.path, shared, prm.format, prm.head, layers, threads)


def _verifier(
    prm: PRMSpec, kv_tokens: int, place: Placement, generator_ctx: KVContext | None = None
) -> LlamaVerifier:
    """generator_ctx: the generator's context, where the PRM shares its weights."""
    return LlamaVerifier(
        load_model(str(prm.path), place.n_gpu_layers),
        prm_format(prm.format),
        kv_tokens,
        n_threads=place.n_threads,
        flash_attn=place.flash_attn,
        head=prm.head,
        generator_ctx=generator_ctx,
    )
