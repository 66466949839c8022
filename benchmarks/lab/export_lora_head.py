"""A fine-tuned verifier from benchmarks/lab/finetune_verifier.py (its lora.safetensors) as a value
head EdgeReason runs on llama.cpp: NAME.safetensors + NAME.json + NAME.lora.gguf
(benchmarks/lab/lora_export.py). The head reads the logits of the token set of an existing head on
the same backbone (--tokens-from).

  python3 -m benchmarks.lab.export_lora_head LORA.safetensors --model qwen2.5-coder-1.5b \
      --alpha 32 --tokens-from edgereason/heads/qwen2.5-coder-1.5b.safetensors \
      --report REPORT.json --out edgereason/heads/qwen2.5-coder-1.5b-lora
(From the repository root, as a module.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# first: edgereason loads llama.cpp before numpy (edgereason/__init__.py)
from edgereason import models

# isort: split

import numpy as np

from benchmarks.lab.lora_export import export_lora_head
from edgereason.heads.value_head import load_head


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lora", help="finetune_verifier's lora.safetensors")
    ap.add_argument(
        "--model", required=True, help="the backbone it was trained on (registry name or .gguf)"
    )
    ap.add_argument("--alpha", type=float, required=True, help="the LoRA alpha it was trained with")
    ap.add_argument(
        "--tokens-from", required=True, help="a value head on the same backbone: its token set"
    )
    ap.add_argument(
        "--report", help="finetune_verifier's report.json: kept as the head's training record"
    )
    ap.add_argument(
        "--out", required=True, help="NAME: writes NAME.safetensors, NAME.json, NAME.lora.gguf"
    )
    args = ap.parse_args(argv)

    from safetensors.numpy import load_file

    tensors = {k: v.astype(np.float32) for k, v in load_file(args.lora).items()}
    record = json.loads(Path(args.report).read_text(encoding="utf-8")) if args.report else {}
    name = args.model if args.model in models.REGISTRY else Path(args.model).stem
    for path in export_lora_head(
        tensors,
        args.alpha,
        models.resolve(args.model),
        name,
        load_head(Path(args.tokens_from)).tokens,
        Path(args.out),
        record,
    ):
        print(path)


if __name__ == "__main__":
    main()
