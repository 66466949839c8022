"""The engine's host work a step, with no model: what the device waits for between passes at many
problems at once.

    python benchmarks/engine_host.py --problems 16,64 --policies baseline,edge
    python benchmarks/engine_host.py --problems 64 --profile 25  # and the 25 slowest functions

The real engine (scheduling, KV accounting, draws into nodes, the PRM queue, selection) drives a
generator and a verifier that compute nothing: the generator draws its tokens from a hash of each
entry's seed (a step ends about every 40 tokens, a path after about 6 steps, as the 1.5B's GSM8K
paths do) and keeps exact KV accounting with shared prefixes; the verifier scores a step by a hash
of its text. What is timed is therefore the host's share of each step: its milliseconds a step, and
the rows a pass, for the 1.5B's default recipe (best-of-8 at T 0.6, the shipped vote) or `--strategy
beam`. One JSON object on stdout; with --profile, the top functions on stderr."""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Sequence

from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.protocols import ScoreRequest, ScoreResult, VerifierStats

EOS, STEP_END, ANSWER = 0, 1, 2
VOCAB = 500
_MASK = (1 << 64) - 1


def _hash(*parts: int) -> int:
    x = 0x9E3779B97F4A7C15
    for part in parts:
        x = ((x ^ (part & _MASK)) * 0xBF58476D1CE4E5B9) & _MASK
        x ^= x >> 31
    return x


class InstantGenerator:
    """The Generator protocol, no model: draws from a hash of (seed, draw); cells reference-counted
    as forks share them."""

    name = "instant"
    eos_ids = frozenset({EOS})
    max_batch_tokens = 2048
    context_length = 32768

    def __init__(self, capacity: int = 1_000_000, slots: int = 1024) -> None:
        self.kv_capacity_tokens = capacity
        self.slots = slots
        self.tables: dict[int, list[int]] = {}
        self.refs: dict[int, int] = {}
        self._ids = 0
        self._cells = 0

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return [3 + (ord(c) % (VOCAB - 3)) for c in text]

    def token_piece(self, token: int) -> bytes:
        if token == STEP_END:
            return b"\n\n"
        return b"" if token == EOS else (b" \\boxed{7}" if token == ANSWER else b" w%d" % token)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return "".join(m["content"] for m in messages)

    def new_seq(self) -> int:
        self._ids += 1
        self.tables[self._ids] = []
        return self._ids

    def fork(self, parent: int) -> int:
        child = self.new_seq()
        self.tables[child] = list(self.tables[parent])
        for cell in self.tables[child]:
            self.refs[cell] += 1
        return child

    def _release(self, cells: Sequence[int]) -> None:
        for cell in cells:
            self.refs[cell] -= 1
            if not self.refs[cell]:
                del self.refs[cell]

    def free(self, seq: int) -> None:
        self._release(self.tables.pop(seq))

    def truncate(self, seq: int, n_tokens: int) -> None:
        self._release(self.tables[seq][n_tokens:])
        del self.tables[seq][n_tokens:]

    def seq_len(self, seq: int) -> int:
        return len(self.tables[seq])

    def unique_tokens(self, seq: int) -> int:
        return sum(1 for cell in self.tables[seq] if self.refs[cell] == 1)

    def can_append(self, n: int) -> bool:
        return len(self.refs) + n <= self.kv_capacity_tokens

    def free_seq_slots(self) -> int:
        return self.slots - len(self.tables)

    def live_seqs(self) -> int:
        return len(self.tables)

    def check_integrity(self) -> None:
        assert len(self.refs) <= self.kv_capacity_tokens

    @property
    def kv_used_tokens(self) -> int:
        return len(self.refs)

    kv_bytes_per_token = 1

    def step(self, batch, samples, sampling) -> list[list[int]]:
        params = [sampling] * len(batch) if isinstance(sampling, SamplingParams) else list(sampling)
        out = []
        for entry, n, p in zip(batch, samples, params):
            table = self.tables[entry.seq]
            for _ in entry.tokens:
                self._cells += 1
                table.append(self._cells)
                self.refs[self._cells] = 1
            out.append([self._draw(p.seed, k, len(table)) for k in range(n)])
        return out

    @staticmethod
    def _draw(seed: int, k: int, length: int) -> int:
        x = _hash(seed, k) % 4000
        if length > 900 or x < 3:
            return ANSWER if x % 2 else EOS
        return STEP_END if x < 100 else 3 + x % (VOCAB - 3)


class InstantVerifier:
    name = "instant-prm"
    kv_capacity_tokens = 1_000_000
    kv_used_tokens = 0
    kv_bytes_per_token = 1

    def __init__(self) -> None:
        self.stats = VerifierStats()

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        self.stats.calls += 1
        return [
            ScoreResult(
                [(_hash(len(r.steps[i]), i) % 1000) / 1000 for i in r.need],
                sum(len(r.steps[i]) for i in r.need),
            )
            for r in requests
        ]

    def release(self, key_prefix: str) -> None:
        pass

    def check_integrity(self) -> None:
        pass


def run(problems: int, policy: str, config: SearchConfig) -> dict:
    gen = InstantGenerator()
    engine = Engine(gen, InstantVerifier(), parse_policy(policy))
    rows = 0
    step = gen.step

    def counted(batch, samples, sampling):
        nonlocal rows
        rows += sum(1 for n in samples if n)
        return step(batch, samples, sampling)

    gen.step = counted
    for i in range(problems):
        engine.submit(
            f"Problem {i}: Janet's ducks lay 16 eggs per day. How many does she sell?", config
        )
    t0 = time.perf_counter()
    results = engine.run_until_done()
    seconds = time.perf_counter() - t0
    return {
        "problems": problems,
        "policy": policy,
        "steps": engine.steps,
        "host_ms_a_step": 1000 * seconds / engine.steps,
        "rows_a_pass": rows / engine.steps,
        "host_us_a_row": 1e6 * seconds / max(rows, 1),
        "tokens": sum(r.metrics.generated_tokens for r in results),
        "done": sum(r.status == "done" for r in results),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", default="16,64")
    p.add_argument("--policies", default="baseline,edge")
    p.add_argument("--strategy", default="best-of-n")
    p.add_argument("--beams", type=int, default=8)
    p.add_argument("--width", type=int, default=4)
    p.add_argument(
        "--profile", type=int, default=0, help="print this many functions by own time (stderr)"
    )
    args = p.parse_args()
    config = SearchConfig(
        strategy=args.strategy,
        beams=args.beams,
        width=args.width,
        max_steps=20,
        max_path_tokens=1024,
        vote="weighted",
        sampling=SamplingParams(temperature=0.6, seed=1),
    )
    out = []
    for problems in map(int, args.problems.split(",")):
        for policy in args.policies.split(","):
            profiler = cProfile.Profile() if args.profile else None
            if profiler:
                profiler.enable()
            out.append(run(problems, policy, config))
            if profiler:
                profiler.disable()
                print(f"--- {problems} problems, {policy}", file=sys.stderr)
                pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(
                    args.profile
                )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
