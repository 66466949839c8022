"""The one interface every backend implements (`Backend`), and what the set-up tells a backend.

A backend is opened by name (`load_backend`, backends/__init__.py) and implements every abstract
method below, and the profiling methods for the roles `capabilities.profiles` names. What differs
between backends is data, `capabilities`, which the set-up reads before it calls; a role a backend
cannot open raises one ConfigError line that says so. Whether it runs on a GPU here depends on the
installed build and the machine, so `supports_gpu()` asks (it may import torch) rather than
declares.

`Placement` says where and how a session's models run: one value, from which each backend reads the
fields that apply to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from edgereason.backends.remote_settings import RemoteSettings
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import Generator, Points, ProfiledGenerator, ProfiledPRM, Verifier

OnDisk = Callable[[str, str], Path | None]  # (model name, role) -> its GGUF where on disk, no pull
Role = Literal["generator", "verifier"]
BOTH_ROLES: frozenset[Role] = frozenset(("generator", "verifier"))


@dataclass(frozen=True)
class Capabilities:
    """What differs between backends, declared."""

    roles: frozenset[Role]  # the roles it opens (each alone too); transformers: the verifier alone
    # the roles memory-profile measures on it (profiled_generator, profiled_prm)
    profiles: frozenset[Role]
    measures_decode: bool  # decode_points measures its generator's pass cost (--policy auto)
    # sequence ids one context hands out at once, the beams one search can have (0: none)
    seq_slots: int
    prm_formats: tuple[str, ...]  # the PRM formats its verifier reads


@dataclass(frozen=True)
class PRMSpec:
    """The PRM a backend opens: its weights (for a served PRM, its GGUF: the tokenizer and
    template), the format it reads, and the value head the `head` format reads (its backbone is
    `path`)."""

    path: Path
    format: str
    head: ValueHead | None = None


@dataclass(frozen=True)
class Placement:
    """Where and how the models run; each backend reads the fields that apply to it."""

    n_gpu_layers: int = 0  # llama.cpp: layers on the GPU; torch: the whole model on CUDA when > 0
    device: str = "auto"  # transformers (an hf: PRM): auto, cpu or cuda
    n_threads: int | None = None  # CPU threads (None: physical cores)
    flash_attn: bool = True  # llama.cpp
    # llama.cpp: a generator's rows cut to their top k on the device (0: whole rows)
    device_top_k: int = 0
    torch_weights: str | None = None  # torch: bf16 or int4 (None: the variable, else the rule)
    remote: RemoteSettings | None = None  # remote: the servers of each role


class Backend(ABC):
    """A model runtime (see the module doc). Paths name a GGUF or, where the backend reads one, a
    folder."""

    name: str
    capabilities: Capabilities

    # -- the device --
    @abstractmethod
    def supports_gpu(self) -> bool:
        """This installation can run a model on a GPU here."""

    @abstractmethod
    def no_gpu_reason(self) -> str:
        """Why it cannot, in words the user can act on (when supports_gpu() is False)."""

    def require_gpu(self, instead: str) -> None:
        """ConfigError unless supports_gpu(); `instead` says what the user can do otherwise."""
        if not self.supports_gpu():
            raise ConfigError(f"{self.no_gpu_reason()}; {instead}")

    @abstractmethod
    def on_gpu(self, place: Placement) -> bool:
        """A model opened with `place` runs on a GPU."""

    # -- before anything loads --
    @abstractmethod
    def check_architecture(self, path: Path) -> None:
        """One ModelError line unless it runs the model's architecture (from its metadata alone)."""

    @abstractmethod
    def check_servers(self, place: Placement, model: str, prm: str, on_disk: OnDisk) -> None:
        """One line where a server of `place` is down or serves another model than the one named:
        before any file is pulled. Nothing to check where the models run here."""

    @abstractmethod
    def kv_bytes_per_token(self, path: Path, place: Placement) -> int:
        """The KV bytes one token of the model takes where it runs (0 where no KV is held here)."""

    @abstractmethod
    def weights_bytes(self, path: Path, place: Placement) -> int:
        """The bytes the model's weights take where they load (0 where none load here)."""

    # -- the roles --
    @abstractmethod
    def open_models(
        self, generator: Path, prm: PRMSpec, kv_tokens: tuple[int, int], place: Placement
    ) -> tuple[Generator, Verifier]:
        """Both roles, sharing weights (or servers) where both name one model; kv_tokens: the
        generator's and the verifier's (a served generator's: the servers' context)."""

    @abstractmethod
    def open_generator(self, path: Path, kv_tokens: int, place: Placement) -> Generator:
        """The generator alone, beside a PRM elsewhere (kv_tokens: a served generator's context)."""

    @abstractmethod
    def open_verifier(self, prm: PRMSpec, kv_tokens: int, place: Placement) -> Verifier:
        """The PRM alone, beside a generator elsewhere."""

    # -- measurements --
    @abstractmethod
    def decode_points(
        self, generator: Generator, rows: tuple[int, ...], steps: int, n_threads: int | None
    ) -> Points | None:
        """Decode throughput at each row count of a generator it opened (None for another's)."""

    def profiled_generator(self, path: Path, place: Placement) -> ProfiledGenerator:
        """The generator as memory-profile measures it (where capabilities.profiles has it)."""
        raise NotImplementedError(f"the {self.name} backend profiles no generator")

    def profiled_prm(
        self,
        prm: PRMSpec,
        place: Placement,
        same_as_generator: bool,
        kv_tokens: int,
    ) -> ProfiledPRM:
        """The PRM as memory-profile measures it (where capabilities.profiles has the verifier);
        same_as_generator: its weights are counted there; kv_tokens: the sample search's KV, where
        the PRM is opened once for all of it."""
        raise NotImplementedError(f"the {self.name} backend profiles no PRM")
