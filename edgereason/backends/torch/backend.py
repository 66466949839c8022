"""The torch backend behind the one interface (backends/interface.py): both roles, the whole model
on CUDA or (slowly, for tests) on the CPU, measured by memory-profile and by --policy auto. Nothing
here imports torch until a method needs it (import_torch: one ConfigError line where it is missing).
"""

from __future__ import annotations

from pathlib import Path

from edgereason.backends import torch as torch_backend
from edgereason.backends.interface import (
    BOTH_ROLES,
    Backend,
    Capabilities,
    OnDisk,
    Placement,
    PRMSpec,
)
from edgereason.backends.prm_format import PRM_FORMATS, prm_format
from edgereason.backends.torch import (
    SEQ_SLOTS,
    device_for,
    import_torch,
    open_model,
    weights_table,
)
from edgereason.errors import ConfigError
from edgereason.protocols import Generator, Points, ProfiledGenerator, ProfiledPRM, Verifier


class TorchBackend(Backend):
    name = "torch"
    capabilities = Capabilities(
        roles=BOTH_ROLES,
        profiles=BOTH_ROLES,
        measures_decode=True,
        seq_slots=SEQ_SLOTS,
        prm_formats=tuple(PRM_FORMATS),
    )

    def supports_gpu(self) -> bool:
        return torch_backend.supports_gpu()

    def no_gpu_reason(self) -> str:
        return torch_backend.no_cuda()

    def on_gpu(self, place: Placement) -> bool:
        return device_for(place.n_gpu_layers) == "cuda"

    def check_architecture(self, path: Path) -> None:
        weights_table(str(path)).config()

    def check_servers(self, place: Placement, model: str, prm: str, on_disk: OnDisk) -> None:
        """No servers: the models run here."""

    def kv_bytes_per_token(self, path: Path, place: Placement) -> int:
        torch = import_torch()
        from edgereason.backends.torch.model import kv_bytes_per_token

        device = torch.device(device_for(place.n_gpu_layers))
        return kv_bytes_per_token(weights_table(str(path)).config(), device)

    def weights_bytes(self, path: Path, place: Placement) -> int:
        """Dequantized on the device: bf16 on CUDA, float32 on the CPU (not the file's size)."""
        return torch_backend.weights_bytes(path, place.n_gpu_layers, place.torch_weights)

    def open_models(
        self, generator: Path, prm: PRMSpec, kv_tokens: tuple[int, int], place: Placement
    ) -> tuple[Generator, Verifier]:
        """flash_attn and device_top_k do not apply: attention is torch's SDPA, sampling runs on the
        device over whole rows."""
        _check_head_source(prm)  # before the generator loads
        gen = self.open_generator(generator, kv_tokens[0], place)
        return gen, self.open_verifier(prm, kv_tokens[1], place)

    def open_generator(self, path: Path, kv_tokens: int, place: Placement) -> Generator:
        from edgereason.backends.torch.generator import TorchGenerator

        return TorchGenerator(open_model(path, place), kv_tokens)

    def open_verifier(self, prm: PRMSpec, kv_tokens: int, place: Placement) -> Verifier:
        from edgereason.backends.torch.verifier import TorchVerifier

        _check_head_source(prm)
        model = open_model(prm.path, place)
        return TorchVerifier(model, prm_format(prm.format), kv_tokens, head=prm.head)

    def decode_points(
        self, generator: Generator, rows: tuple[int, ...], steps: int, n_threads: int | None
    ) -> Points | None:
        """None for a generator that is not a TorchGenerator."""
        from edgereason.backends.torch.generator import TorchGenerator
        from edgereason.backends.torch.measure import measure_decode

        if not isinstance(generator, TorchGenerator):
            return None
        return measure_decode(generator.model, rows, steps)

    def profiled_generator(self, path: Path, place: Placement) -> ProfiledGenerator:
        import_torch()  # before profiler_probes.py imports it
        from edgereason.backends.torch.profiler_probes import profiled_generator

        return profiled_generator(path, place)

    def profiled_prm(
        self,
        prm: PRMSpec,
        place: Placement,
        same_as_generator: bool,
        kv_tokens: int,
    ) -> ProfiledPRM:
        import_torch()
        from edgereason.backends.torch.profiler_probes import profiled_prm

        return profiled_prm(prm.path, same_as_generator, prm.format, prm.head, place)


def _check_head_source(prm: PRMSpec) -> None:
    if prm.head is not None and Path(prm.path).is_dir():
        raise ConfigError(
            "a value head is checked against the sha256 of the GGUF it was trained on, and the PRM "
            "is a Hugging Face folder; use that GGUF as --prm, or --prm-format judge"
        )
