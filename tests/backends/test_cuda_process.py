"""Where llama.cpp runs on a GPU: one process runs a real search on the GPU beside numpy, matplotlib
and torch in the orders that crashed issue 13's builds, and exits cleanly. Skipped, with the reason,
where there is no CUDA build or no GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgereason.backends import load_backend
from edgereason.session.gpu import gpu_present

pytestmark = pytest.mark.skipif(
    not (load_backend("llamacpp").supports_gpu() and gpu_present()),
    reason="needs a CUDA build of llama-cpp-python and an NVIDIA GPU",
)

SOLVE = (
    "from edgereason.cli.main import main\nassert main(['solve', 'What is 2 + 3?', '--model', "
    "'smollm2-135m', '--gpu-layers', '999', '--beams', '2', '--max-steps', '2', "
    "'--max-step-tokens', '24', '--json']) == 0\n"
)
PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.plot([1, 2])\nplt.savefig({png!r})\n"
)
TORCH = "import torch\nassert float(torch.ones(3).sum()) == 3.0\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "order", ["numpy, solve", "solve, plot", "plot, solve", "solve, torch", "torch, solve"]
)
def test_a_gpu_search_lives_beside_numpy_matplotlib_and_torch(order, smollm2_path, tmp_path):
    parts = {
        "numpy": "import numpy\n",
        "solve": SOLVE,
        "plot": PLOT.format(png=str(tmp_path / "p.png")),
        "torch": TORCH,
    }
    if "torch" in order:
        pytest.importorskip("torch")
    code = "".join(parts[p.strip()] for p in order.split(","))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{order}: exit {done.returncode}\n{done.stderr[-2000:]}"


def test_the_installed_cuda_build_uses_the_system_cxx_runtime():
    from edgereason.backends.cxx_runtime import private_cxx_runtime

    assert private_cxx_runtime() is None, (
        "rebuild llama-cpp-python as the README's GPU section says"
    )
