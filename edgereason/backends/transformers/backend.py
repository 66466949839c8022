"""The transformers backend behind the one interface (backends/interface.py): a PRM alone (`--prm
hf:PATH`), on the device `Placement.device` names, beside a generator on llama.cpp or torch;
memory-profile measures it."""

from __future__ import annotations

from pathlib import Path

from edgereason.backends import transformers as hf
from edgereason.backends.interface import Backend, Capabilities, OnDisk, Placement, PRMSpec
from edgereason.backends.transformers.formats import TORCH_FORMATS
from edgereason.backends.transformers.torch_device import import_torch, on_cuda
from edgereason.errors import ConfigError
from edgereason.protocols import Generator, Points, ProfiledPRM, Verifier

PRM_ALONE = "transformers runs a PRM alone (--prm hf:PATH), beside a generator on llamacpp or torch"


class TransformersBackend(Backend):
    name = "transformers"
    capabilities = Capabilities(
        roles=frozenset({"verifier"}),
        profiles=frozenset({"verifier"}),
        measures_decode=False,
        seq_slots=0,  # paths are held by key, in per-path caches
        prm_formats=TORCH_FORMATS,
    )

    def supports_gpu(self) -> bool:
        return bool(import_torch().cuda.is_available())

    def no_gpu_reason(self) -> str:
        return f"torch {import_torch().__version__} sees no CUDA device"

    def on_gpu(self, place: Placement) -> bool:
        return on_cuda(place.device)

    def check_architecture(self, path: Path) -> None:
        """Nothing to read beforehand: transformers says what it cannot load when it loads it."""

    def check_servers(self, place: Placement, model: str, prm: str, on_disk: OnDisk) -> None:
        """No servers: the PRM runs here."""

    def kv_bytes_per_token(self, path: Path, place: Placement) -> int:
        return hf.kv_bytes_per_token(path, place.device)

    def weights_bytes(self, path: Path, place: Placement) -> int:
        return hf.weights_bytes(path, place.device)

    def open_models(
        self, generator: Path, prm: PRMSpec, kv_tokens: tuple[int, int], place: Placement
    ) -> tuple[Generator, Verifier]:
        raise ConfigError(PRM_ALONE)

    def open_generator(self, path: Path, kv_tokens: int, place: Placement) -> Generator:
        raise ConfigError(PRM_ALONE)

    def open_verifier(self, prm: PRMSpec, kv_tokens: int, place: Placement) -> Verifier:
        device, threads = place.device, place.n_threads
        return hf.open_verifier(prm.path, prm.format, kv_tokens, device, prm.head, threads)

    def decode_points(
        self, generator: Generator, rows: tuple[int, ...], steps: int, n_threads: int | None
    ) -> Points | None:
        """It opens no generator."""
        return None

    def profiled_prm(
        self,
        prm: PRMSpec,
        place: Placement,
        same_as_generator: bool,
        kv_tokens: int,
    ) -> ProfiledPRM:
        """Opened once, with room for kv_tokens; its weights never serve the generator."""
        from edgereason.backends.transformers.profiler_probes import profiled_prm

        device, threads = place.device, place.n_threads
        return profiled_prm(prm.path, prm.format, prm.head, device, kv_tokens, threads)
