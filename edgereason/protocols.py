"""The two model protocols the engine drives (design.md section 2). Backends implement them; the
engine knows no concrete backend.

Rules every Generator keeps:
- A SeqId names one KV sequence. `fork` shares the parent's KV (no copy); only tokens appended
  afterwards use new memory. `free` releases the id; an id is reused only after it was freed.
- `step` runs ONE forward pass over every entry of the batch (prefill chunks and single decode
  tokens mixed) and then draws `samples[i]` independent tokens from entry i's next-token
  distribution (0 draws: prefill only), with a random stream seeded by entry i's
  `SamplingParams.seed`, so the draws do not depend on the batch's composition.
- `kv_used_tokens` counts distinct KV cells (shared prefixes once); it never exceeds
  `kv_capacity_tokens`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from edgereason.config import SamplingParams

SeqId = int


class BatchEntry(NamedTuple):
    seq: SeqId
    tokens: list[int]  # appended to seq's KV in this forward pass; at least one


class GeneratorPath(NamedTuple):
    """Where the generator holds a path, for a verifier that reads the generator's own rows
    (`reads_generator`)."""

    # a generator sequence whose KV starts with the path (it may go on: a descendant's); None: none
    seq: SeqId | None
    tokens: Sequence[int]  # the prompt's tokens, then every step's, as generated
    prompt_len: int  # the prompt's tokens in `tokens`
    # ends[k]: where step k+1 ends in `tokens`; its score is read at tokens[ends[k] - 1]
    ends: Sequence[int]


class ScoreRequest(NamedTuple):
    """Score some steps of one path. The verifier may reuse the KV it holds under `prefix_key`, a
    path whose first `prefix_steps` steps equal this one's, so growing a path by one step costs only
    that step's tokens."""

    key: str  # names this path; the verifier holds it under this key afterwards
    question: str
    steps: Sequence[str]  # steps 1..n of the path
    need: Sequence[int]  # indices into steps whose score is wanted
    prefix_key: str | None = None
    prefix_steps: int = 0
    # given to a verifier that reads the generator's rows
    generator_path: GeneratorPath | None = None


@runtime_checkable
class KVMemory(Protocol):
    @property
    def kv_capacity_tokens(self) -> int: ...
    @property
    def kv_used_tokens(self) -> int: ...


@runtime_checkable
class Generator(KVMemory, Protocol):
    name: str
    eos_ids: frozenset[int]

    def tokenize(self, text: str, special: bool = True) -> list[int]: ...
    def token_piece(self, token: int) -> bytes: ...
    def apply_chat_template(self, messages: list[dict[str, str]]) -> str: ...

    def new_seq(self) -> SeqId: ...
    def fork(self, parent: SeqId) -> SeqId: ...
    def free(self, seq: SeqId) -> None: ...
    def truncate(self, seq: SeqId, n_tokens: int) -> None: ...
    def seq_len(self, seq: SeqId) -> int: ...
    def free_seq_slots(self) -> int: ...
    def live_seqs(self) -> int:
        """Sequence ids handed out and not freed (the engine's integrity check: each belongs to one
        node)."""
        ...

    def check_integrity(self) -> None:
        """The backend's own accounting agrees with the runtime; raises AssertionError otherwise."""
        ...

    @property
    def max_batch_tokens(self) -> int: ...
    @property
    def context_length(self) -> int:
        """Tokens of context the model was trained on: a prompt must leave room below it."""
        ...

    def step(
        self,
        batch: Sequence[BatchEntry],
        samples: Sequence[int],
        sampling: SamplingParams | Sequence[SamplingParams],
    ) -> list[list[int]]: ...


@runtime_checkable
class Verifier(KVMemory, Protocol):
    """A verifier whose `reads_generator` is True (optional; False when absent) scores a request
    that names a resident generator sequence in the generator's own context, so the engine keeps a
    finished path's generator KV until its score is in."""

    stats: VerifierStats  # updated by every `score` call

    def check_integrity(self) -> None:
        """The held paths agree with the runtime's KV; raises AssertionError otherwise."""
        ...

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """For each request, one score in [0, 1] per requested step, in `need` order."""
        ...

    def release(self, key_prefix: str) -> None:
        """Forget the KV held for every path whose key starts with `key_prefix`."""
        ...


class FeatureReader(Protocol):
    """A verifier in the head format as value-head training reads it (training/features.py)."""

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """The middle layers whose hidden states follow the logits in each row of `features`."""
        ...

    def features(self, requests: Sequence[ScoreRequest], tokens: Any) -> list[Any]:
        """Per request, a row per requested step: the logits of `tokens` (a numpy array of ids),
        then the hidden state of each of `feature_layers` at the step's last token."""
        ...

    def release(self, key_prefix: str) -> None: ...


class ScoreResult(NamedTuple):
    scores: list[float]  # one per `need` index, in that order
    new_tokens: int  # tokens the verifier evaluated for this request (0 when all were held)


@dataclass
class VerifierStats:
    """What a verifier did, summed over its calls (EngineStats takes the rebuilt tokens of each call
    from it)."""

    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    rebuilt_tokens: int = 0  # tokens evaluated again because a held prefix had been dropped
    # steps scored by a row read in the generator's context (reads_generator)
    generator_rows: int = 0
    # most KV tokens in use, at the end of a call (before the engine releases dead paths)
    peak_tokens: int = 0
    per_call_tokens: list[int] = field(default_factory=list)


# -------------------------------------------------------- what a backend offers the memory profiler
# (x, tokens per second), x ascending: sequences or batch tokens
Points = tuple[tuple[int, float], ...]
Progress = Callable[[str], None]


class Prompter(Protocol):
    """What `engine.prompt.prompt_ids` reads of a generator: enough to count a problem's prompt
    tokens before any KV cache is made."""

    name: str

    @property
    def context_length(self) -> int: ...
    @property
    def kv_capacity_tokens(self) -> int: ...
    def tokenize(self, text: str, special: bool = True) -> list[int]: ...
    def apply_chat_template(self, messages: list[dict[str, str]]) -> str: ...


@dataclass(frozen=True)
class ProfiledGenerator:
    """A generator model as `memory-profile` measures it (backends make it:
    `profiled_generator`)."""

    bytes_per_token: int  # KV bytes one token takes
    weights_bytes: int  # on the device
    max_seqs: int  # sequences it runs at once (one a beam)
    prompter: Prompter
    # (rows, steps, threads,
    decode: Callable[[Sequence[int], int, int | None, Progress | None, int], Points]
    # progress, device top-k) -> decode points
    # KV tokens -> a Generator for the sample search; the caller closes it
    open_generator: Callable[[int], Generator]


@dataclass(frozen=True)
class ProfiledPRM:
    """A PRM as `memory-profile` measures it (backends make it: `profiled_prm`)."""

    bytes_per_token: int
    # on the device, besides the generator's (0 when the generator's weights serve both)
    weights_bytes: int
    # KV tokens -> a Verifier for the sample search; the caller closes it
    open_verifier: Callable[[int], Any]
    # question -> tokens of its head (no KV cache needed: checked before measuring)
    head_tokens: Callable[[str], int]
    # the prefill points
    measure: Callable[[Sequence[int], int, int | None, Progress | None], Points]
