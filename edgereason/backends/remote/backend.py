"""The remote backend behind the one interface (backends/interface.py): either role, or both, served
by OpenAI-compatible servers (`Placement.remote`); only the tokenizer and chat template load here.
"""

from __future__ import annotations

from pathlib import Path

from edgereason.backends import remote
from edgereason.backends.interface import (
    BOTH_ROLES,
    Backend,
    Capabilities,
    OnDisk,
    Placement,
    PRMSpec,
)
from edgereason.backends.prm_format import PRM_FORMATS
from edgereason.backends.remote_settings import RemoteSettings
from edgereason.errors import ConfigError
from edgereason.protocols import Generator, Points, Verifier

# a server returns a few logprobs a token: no value head (the solve-prompt formats read thousands of
# logits)
SERVED_FORMATS = tuple(name for name, fmt in PRM_FORMATS.items() if fmt.prompt != "solve")


def _servers(place: Placement) -> RemoteSettings:
    if place.remote is None:
        raise ConfigError("the remote backend needs its servers: --base-url or --prm-base-url")
    return place.remote


class RemoteBackend(Backend):
    name = "remote"
    capabilities = Capabilities(
        roles=BOTH_ROLES,
        profiles=frozenset(),
        measures_decode=False,
        seq_slots=0,
        prm_formats=SERVED_FORMATS,
    )

    def supports_gpu(self) -> bool:
        return False

    def no_gpu_reason(self) -> str:
        return "the remote backend runs no model here (its servers choose their devices)"

    def on_gpu(self, place: Placement) -> bool:
        return False

    def check_architecture(self, path: Path) -> None:
        """Nothing to check: the servers run the models; check_servers asks them."""

    def check_servers(self, place: Placement, model: str, prm: str, on_disk: OnDisk) -> None:
        remote.check_servers(_servers(place), model, prm, on_disk)

    def kv_bytes_per_token(self, path: Path, place: Placement) -> int:
        return 0  # the servers hold the KV

    def weights_bytes(self, path: Path, place: Placement) -> int:
        return 0  # the servers hold the weights

    def open_models(
        self, generator: Path, prm: PRMSpec, kv_tokens: tuple[int, int], place: Placement
    ) -> tuple[Generator, Verifier]:
        """Both served (the paths: GGUFs read for their tokenizers; the generator's KV tokens: the
        servers' context); a server both roles use is reported once when it stops answering."""
        servers, outages = _servers(place), remote.Outages()
        endpoints = servers.prm_endpoints
        verifier = remote.open_verifier(prm.path, prm.format, endpoints, outages=outages)
        try:
            context, steps = kv_tokens[0], servers.step_tokens
            gen = remote.open_generator(generator, servers.generator, context, steps, outages)
        except BaseException:
            verifier.close()
            raise
        return gen, verifier

    def open_generator(self, path: Path, kv_tokens: int, place: Placement) -> Generator:
        servers = _servers(place)
        return remote.open_generator(path, servers.generator, kv_tokens, servers.step_tokens)

    def open_verifier(self, prm: PRMSpec, kv_tokens: int, place: Placement) -> Verifier:
        """A server cannot run a value head: the head format is refused there."""
        return remote.open_verifier(prm.path, prm.format, _servers(place).prm_endpoints)

    def decode_points(
        self, generator: Generator, rows: tuple[int, ...], steps: int, n_threads: int | None
    ) -> Points | None:
        """A served generator's pass cost is its servers'."""
        return None
