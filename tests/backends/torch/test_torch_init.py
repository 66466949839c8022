"""The torch backend's package module: forget_loaded_models frees the models the process keeps
loaded (SmolLM2 on the CPU), and needs no torch where none was imported."""

from __future__ import annotations

import subprocess
import sys
import weakref
from pathlib import Path

from edgereason.backends.torch import forget_loaded_models, gguf_weights, model, weights_table

REPO = Path(__file__).resolve().parents[3]


def test_forgetting_frees_the_loaded_model(smollm2_path):
    forget_loaded_models()  # whatever an earlier test of this module kept
    path = str(smollm2_path)
    loaded = model.load_model(path, "cpu")
    weights_table(path)
    assert model.load_model(path, "cpu") is loaded  # kept: the second load reads nothing
    decoder = weakref.ref(loaded.decoder)
    del loaded
    forget_loaded_models()
    assert decoder() is None  # nothing else held the weights
    caches = [model._load_model, model.load_decoder, weights_table, gguf_weights._read_layout]
    assert [c.cache_info().currsize for c in caches] == [0, 0, 0, 0]
    assert model.load_model(path, "cpu").n_layer == 30  # and it loads again


def test_forgetting_imports_no_torch():
    code = (
        "import sys\n"
        "from edgereason.backends.torch import forget_loaded_models\n"
        "forget_loaded_models()\n"
        "print('torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout.strip() == "False"
