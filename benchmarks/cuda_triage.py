"""Which library orders crash a CUDA llama.cpp process (issue 13): each scenario runs in its own
process, imports things in a given order around a real `solve` on the GPU, and reports its exit
status, the signal if one killed it, the loaded copies of the libraries that could clash, and the
end of stderr.

    python benchmarks/cuda_triage.py --model qwen2.5-coder-0.5b --out triage.json

With a crash handler preloaded the crashing scenarios also report their native stacks, symbolized by
addr2line where the libraries have debug info (a build with CMAKE_C_FLAGS/CMAKE_CXX_FLAGS=-g):

    gcc -shared -fPIC -o /tmp/segv_backtrace.so benchmarks/segv_backtrace.c -ldl
    LD_PRELOAD=/tmp/segv_backtrace.so python benchmarks/cuda_triage.py --out triage.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

SOLVE = (
    "from edgereason.cli.main import main\nrc = main(['solve', 'What is 2 + 3?', '--model', "
    "{model!r}, '--beams', '4', '--max-steps', '2', '--max-step-tokens', '32', "
    "'--json'])\nprint('solve rc', rc, flush=True)\n"
)
TORCH_WORK = (
    "import torch\nnet = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), "
    "torch.nn.Linear(32, 1))\nopt = torch.optim.Adam(net.parameters())\nfor _ in range(20):\n    "
    "loss = net(torch.randn(128, 64)).square().mean(); opt.zero_grad(); loss.backward(); "
    "opt.step()\nprint('torch cpu ok', flush=True)\nif torch.cuda.is_available():\n    "
    "print('torch cuda ok', float((torch.ones(4, device='cuda') * 2).sum()), flush=True)\n"
)
PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.plot([1, 2]); plt.savefig('/tmp/triage.png'); print('plot ok', flush=True)\n"
)
# torch's own CUDA libraries (pip nvidia-* wheels), loaded globally before llama.cpp: llama.cpp then
# binds to the same cudart/cuBLAS that torch will use instead of /usr/local/cuda's copies of the
# same sonames
TORCH_CUDA_LIBS_FIRST = (
    "import ctypes, glob, sysconfig\n"
    "root = sysconfig.get_paths()['purelib'] + '/nvidia'\n"
    "for name in ('libcudart.so.*', 'libcublasLt.so.*', 'libcublas.so.*'):\n"
    "    for f in sorted(glob.glob(root + '/**/' + name, recursive=True))[:1]:\n"
    "        ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL); print('preloaded', f, flush=True)\n"
)
MAPS = (
    "import re\nlibs = sorted({l.split()[-1] for l in open('/proc/self/maps') if re.search("
    "r'cublas|cudart|gomp|stdc\\+\\+|openblas|libggml|libllama|libcuda\\.so', l)})\n"
    "print('MAPS', '|'.join(libs), flush=True)\n"
)

SCENARIOS: dict[str, str] = {
    "solve": "import edgereason\n" + SOLVE + MAPS,
    "numpy_first": "import numpy\nimport edgereason\n" + SOLVE,
    "matplotlib_first": PLOT + "import edgereason\n" + SOLVE,
    "matplotlib_after": "import edgereason\n" + SOLVE + PLOT,
    "torch_first": TORCH_WORK + "import edgereason\n" + SOLVE + MAPS,
    "torch_after_solve": "import edgereason\n" + SOLVE + TORCH_WORK + MAPS,
    "torch_after_import": "import edgereason\n" + TORCH_WORK + MAPS,
    "torch_libs_then_torch_after": TORCH_CUDA_LIBS_FIRST
    + "import edgereason\n"
    + SOLVE
    + TORCH_WORK
    + MAPS,
}


def run(name: str, code: str, timeout: float) -> dict:
    t = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
    maps = [line[5:] for line in out.splitlines() if line.startswith("MAPS ")]
    return {
        "scenario": name,
        "rc": rc,
        "seconds": round(time.perf_counter() - t, 1),
        "stdout_marks": [
            line
            for line in out.splitlines()
            if line.endswith(" ok") or " ok " in line or line.startswith("solve rc")
        ],
        "libs": maps[0].split("|") if maps else [],
        "stderr_tail": err[-1500:],
        "native_stack": symbolize(err),
    }


def symbolize(stderr: str) -> list[str]:
    """Frames printed by an LD_PRELOAD crash handler as `#i /path/lib.so +0xOFFSET (...)`, each
    given its function and source line by addr2line where the library has debug info."""
    frames = []
    for line in stderr.splitlines():
        m = re.match(r"#(\d+) (/\S+) \+(0x[0-9a-f]+)", line)
        if not m:
            continue
        where = line
        if shutil.which("addr2line") and (
            "llama_cpp/lib" in m[2] or "numpy" in m[2] or "torch" in m[2]
        ):
            out = subprocess.run(
                ["addr2line", "-f", "-C", "-i", "-e", m[2], m[3]], capture_output=True, text=True
            ).stdout.split("\n")
            where += "  <= " + " / ".join(x for x in out if x and x != "??:0")[:300]
        frames.append(where)
    return frames


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--only", default=None, help="comma list of scenarios")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(SCENARIOS)
    results = []
    for name in names:
        results.append(
            run(name, SCENARIOS[name].replace("{model!r}", repr(args.model)), args.timeout)
        )
        print(
            json.dumps({k: results[-1][k] for k in ("scenario", "rc", "seconds", "stdout_marks")}),
            flush=True,
        )
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
