"""A real vLLM OpenAI-compatible server on 127.0.0.1, for the remote backend's tests on the GPU
machine (issue 66). vLLM is not a dependency of the project: the lease installs it into a folder of
its own, named by EDGEREASON_VLLM_SITE, beside the machine's torch; the served model is a Hugging
Face folder that `edgereason models export` wrote, named by EDGEREASON_VLLM_MODEL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from remote_server import free_port, not_serving

SITE = os.environ.get("EDGEREASON_VLLM_SITE", "")
MODEL = os.environ.get("EDGEREASON_VLLM_MODEL", "")
START_S = 300  # imports, the engine's process, the weights and the KV profile (about 60 s)


def vllm_ready() -> bool:
    """The lease set both up, and a CUDA device is here."""
    if not (SITE and MODEL and Path(SITE, "vllm").is_dir() and Path(MODEL).is_dir()):
        return False
    import torch

    return torch.cuda.is_available()


class VLLMServer:
    def __init__(self, memory_share: float = 0.08) -> None:
        """memory_share: vLLM's --gpu-memory-utilization, small so that two fit beside the tests'
        other work; eager (no CUDA graphs, no compile): these tests check behaviour, not speed."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()  # a pipe would fill with the server's log and stall it
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--enforce-eager"]
        argv += ["--gpu-memory-utilization", str(memory_share), "--max-model-len", "4096"]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([SITE, os.environ.get("PYTHONPATH", "")]),
        }
        # a session of its own: the engine's worker process goes with the server when it is killed
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if why := not_serving(self.url, self.proc, START_S):
            log = self.tail()
            self.stop()
            raise RuntimeError(f"vLLM {why}: {log}")

    def tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self.log.close()
