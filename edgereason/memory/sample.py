"""A sample search that measures the workload the split is modelled on: how long steps are, how long the prompt
and the PRM's question head are, and the most KV cells each model uses (forks share cells; the PRM holds every
candidate of a step until its selection). Measured, because these depend on the models' tokenizers, chat
templates and how they reason, which no fixed formula knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

from edgereason.backends.llamacpp import LlamaGenerator, LlamaVerifier, LlamaModel
from edgereason.backends.prm_format import prm_format
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine import Engine
from edgereason.policy import PRESETS

SAMPLE_PROBLEM = ("A baker makes 24 muffins in the morning and 18 in the afternoon. She sells 3/4 of them and gives "
                  "5 to a neighbour. Each muffin she sells costs $2. How many muffins are left, and how much money "
                  "did she make?")
SAMPLE_KV_TOKENS = 16384  # roomy: the sample must not be shaped by a budget


@dataclass(frozen=True)
class WorkloadSample:
    step_tokens: int  # mean tokens of a finished step
    prompt_tokens: int
    head_tokens: int
    generator_peak_tokens: int
    verifier_peak_tokens: int
    generator_mean_tokens: int  # KV in use, averaged over the engine steps
    verifier_mean_tokens: int


def sample_search(gen_model: LlamaModel, prm_model: LlamaModel, prm_format_name: str, beams: int, width: int,
                  steps: int, max_step_tokens: int, n_threads: int | None = None,
                  problem: str = SAMPLE_PROBLEM) -> WorkloadSample:
    gen = LlamaGenerator(gen_model, SAMPLE_KV_TOKENS, n_threads=n_threads)
    ver = LlamaVerifier(prm_model, prm_format(prm_format_name), SAMPLE_KV_TOKENS, n_threads=n_threads)
    try:
        engine = Engine(gen, ver, PRESETS["baseline"])
        req = engine.submit(problem, SearchConfig(beams=beams, width=width, max_steps=steps,
                                                  max_step_tokens=max_step_tokens, sampling=SamplingParams(seed=0)))
        gen_used, ver_used = [], []
        while engine.busy:
            engine.step()
            gen_used.append(gen.kv_used_tokens)
            ver_used.append(ver.kv_used_tokens)
        finished = [len(n.tokens) for n in req.tree.steps() if n.finish is not None] or [max_step_tokens]
        head = len(prm_model.tokenize(ver.prompt.head(problem), add_bos=prm_model.add_bos))
        return WorkloadSample(round(mean(finished)), len(req.prompt_ids), head, max(gen_used),
                              ver.stats.peak_tokens, round(mean(gen_used)), round(mean(ver_used)))
    finally:
        gen.close()
        ver.close()
