"""`python -m edgereason.backends.remote.llamacpp_server ARGS`: llama-cpp-python's OpenAI-compatible
server (`python -m llama_cpp.server ARGS`, its `server` extra) with the weight-layout guard of the
llama.cpp backend, that takes a completion's prompt as token ids too.

ggml repacks weights for Intel AMX where the CPU advertises it, and its AMX matmul dies with a
general protection fault on VMs that advertise AMX without enabling it; the stock server then dies
on its first completion. Here the weights keep their plain layout on such CPUs, as the llama.cpp
backend's do (cpu_features.py).

The remote backend sends prompts as token ids (OpenAI's API, llama.cpp's llama-server, vLLM and
SGLang take them): text would be tokenized again with control tokens parsed, so a problem or a step
that writes "<|im_end|>" would end its turn. The stock server types `prompt` as text only; its
completion call takes ids."""

from __future__ import annotations

from typing import Any

import llama_cpp.llama_cpp as L

from edgereason.backends.cpu_features import cpu_advertises_amx

_default_params = L.llama_model_default_params


def _guarded_params():  # type: ignore[no-untyped-def]
    params = _default_params()
    params.use_extra_bufts = not cpu_advertises_amx()
    return params


def _take_token_prompts() -> None:
    """Swap in a request type whose prompt may be token ids, before the server's routes read the
    type. The route unwraps a one-element list prompt, so ids come wrapped as [ids] and reach the
    completion call as ids."""
    from llama_cpp.server import types
    from pydantic import field_validator

    class CompletionRequest(types.CreateCompletionRequest):
        prompt: str | list[str] | list[list[int]] = ""

        @field_validator("prompt", mode="before")
        @classmethod
        def _wrap_ids(cls, prompt: Any) -> Any:
            is_ids = isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)
            return [prompt] if is_ids else prompt

    types.CreateCompletionRequest = CompletionRequest  # type: ignore[misc]


def main() -> None:
    L.llama_model_default_params = _guarded_params  # llama_cpp.Llama reads it through the module
    _take_token_prompts()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
