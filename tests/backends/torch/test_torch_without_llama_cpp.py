"""The torch backend stands alone: with llama_cpp unimportable (a meta-path finder refuses it, in a
fresh process) it opens SmolLM2 from a Hugging Face folder, generates and scores, and `solve` runs
on it; a GGUF, whose tokenizer is read through llama.cpp's library, is one ConfigError line naming
the folder way. The package imports without llama_cpp too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HIDE = """
import sys

class HideLlamaCpp:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "llama_cpp":
            raise ModuleNotFoundError(f"No module named {name!r} (hidden)", name=name)
        return None

sys.meta_path.insert(0, HideLlamaCpp())
"""
LOADED = "any(m.split('.')[0] == 'llama_cpp' for m in sys.modules)"

OPEN = """
import json
from edgereason.backends import Placement, PRMSpec, load_backend
from edgereason.config import SamplingParams
from edgereason.errors import ConfigError
from edgereason.protocols import BatchEntry, ScoreRequest

torch_backend = load_backend("torch")
gen, ver = torch_backend.open_models(FOLDER, PRMSpec(FOLDER, "judge"), (512, 512), Placement())
seq = gen.new_seq()
prompt = gen.tokenize(gen.apply_chat_template([{"role": "user", "content": "What is 2+3?"}]))
drawn = gen.step([BatchEntry(seq, prompt)], [1], SamplingParams(temperature=0.0, seed=0))
score = ver.score([ScoreRequest("p", "What is 2+3?", ["2+3=5."], [0], "root", 0)])[0].scores[0]
try:
    torch_backend.open_generator(GGUF, 256, Placement())
    gguf = "opened"
except ConfigError as e:
    gguf = str(e)
print(json.dumps({"drawn": drawn, "score": score, "gguf": gguf, "loaded": LOADED_CHECK}))
"""


def run_hidden(script: str) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter that cannot import llama_cpp, on this checkout."""
    argv = [sys.executable, "-c", HIDE + script]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_the_torch_backend_opens_a_folder_without_llama_cpp(smollm2_hf, smollm2_path):
    script = OPEN.replace("FOLDER", repr(str(smollm2_hf))).replace("GGUF", repr(str(smollm2_path)))
    proc = run_hidden(script.replace("LOADED_CHECK", LOADED))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["drawn"][0]) == 1 and 0.0 <= out["score"] <= 1.0
    assert "llama-cpp-python, which is not installed" in out["gguf"] and "hf:FOLDER" in out["gguf"]
    assert out["loaded"] is False  # nothing imported llama_cpp


@pytest.mark.slow  # a search in float32 torch on the CPU
def test_solve_runs_on_a_folder_without_llama_cpp(smollm2_hf):
    flags = ["--beams", "2", "--width", "2", "--max-steps", "1", "--max-step-tokens", "8", "--json"]
    argv = ["solve", "What is 2+3?", "--model", f"hf:{smollm2_hf}", "--backend", "torch", *flags]
    script = f"""
from edgereason.cli.main import main
code = main({argv!r} + ["--gpu-layers", "0", "--kv-tokens", "1024"])
print("llama_cpp loaded:", {LOADED}, file=sys.stderr)
sys.exit(code)
"""
    proc = run_hidden(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["backend"] == "torch"
    assert "llama_cpp loaded: False" in proc.stderr
