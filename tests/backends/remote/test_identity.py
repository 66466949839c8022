"""A server that serves another model than `--model` / `--prm` name is one line naming the served
model, before any search and before the named model is pulled (backends/remote/identity.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gguf
import pytest
from remote_server import JSONHandler, LocalServer

from edgereason import models
from edgereason.backends.llama_vocab import load_vocab
from edgereason.backends.remote.client import CompletionClient
from edgereason.backends.remote.identity import (
    PROBE,
    REGISTRY_PROBE_ENDS,
    check_served_model,
    served_tokens,
)
from edgereason.backends.remote_settings import Endpoint
from edgereason.errors import ConfigError
from edgereason.models import download
from edgereason.session.backend_choice import gguf_on_disk

# a search, were one to start by mistake, stays short
SMALL = ["--max-steps", "2", "--max-tokens", "80"]


def swapped_tokenizer_gguf(source: Path, out: Path) -> Path:
    """A vocab-only GGUF of `source` whose tokens 1 and 2 trade ids (SmolLM2: <|im_start|> and
    <|im_end|>): a tokenizer that is not the source's, with everything else (template, context) the
    same."""
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(out, arch=reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # written by the writer itself
        value = field.contents()
        if field.name in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
            value[1], value[2] = value[2], value[1]
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


@pytest.fixture(scope="module")
def other_gguf(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swapped_tokenizer_gguf(
        smollm2_path, tmp_path_factory.mktemp("other") / "other-tokenizer.gguf"
    )


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def mismatch_line(proc: subprocess.CompletedProcess, served: str, flag: str) -> str:
    """The one line a mismatch is: exit 2, the served model's id and the flag to fix."""
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert f"serves {served!r}" in lines[0] and f"pass {flag} naming" in lines[0], lines[0]
    return lines[0]


# -------------------------------------------------------- the CLI against llama-cpp-python's server
@pytest.mark.slow
def test_no_model_against_a_smollm2_server_is_named_before_the_default_is_pulled(
    server: LocalServer, smollm2_path: Path, tmp_path: Path
) -> None:
    """The issue: without --model the 1.1 GB default was pulled, then the PRM 'ignored logit_bias'.
    Here the default is not on disk and the package index is off: a pull would fail with a download
    error instead."""
    home = tmp_path / "home"
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--backend",
        "remote",
        "--base-url",
        server.url,
        *SMALL,
        env={"EDGEREASON_HOME": str(home), "PIP_NO_INDEX": "1"},
    )
    line = mismatch_line(proc, str(smollm2_path), "--model")
    assert models.DEFAULT_MODEL in line
    assert not (home / "models").exists()  # nothing pulled, nothing begun


@pytest.mark.slow
def test_a_local_gguf_of_another_tokenizer_is_named(
    server: LocalServer, smollm2_path: Path, other_gguf: Path
) -> None:
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--model",
        str(other_gguf),
        "--backend",
        "remote",
        "--base-url",
        server.url,
        *SMALL,
    )
    mismatch_line(proc, str(smollm2_path), "--model")


@pytest.mark.slow
def test_a_served_prm_of_another_tokenizer_names_prm(
    server: LocalServer, smollm2_path: Path, other_gguf: Path
) -> None:
    """The generator runs here (its model is right); the PRM named for the server is not the served
    one."""
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--model",
        str(smollm2_path),
        "--prm",
        str(other_gguf),
        "--prm-base-url",
        server.url,
        "--kv-tokens",
        "2048",
        "--threads",
        "2",
        *SMALL,
    )
    mismatch_line(proc, str(smollm2_path), "--prm")


# ---------------------------------------------------------------- the check itself
@pytest.mark.slow
def test_llama_cpp_pythons_server_tokenizes_the_probe_as_the_gguf_does(
    server: LocalServer, smollm2: Any
) -> None:
    client = CompletionClient(Endpoint(server.url))
    try:
        assert served_tokens(client, PROBE) == smollm2.tokenize(PROBE, add_bos=False, special=True)
    finally:
        client.close()


@pytest.mark.slow
def test_the_served_model_named_passes_by_path_and_by_registry_name(
    server: LocalServer, smollm2_path: Path
) -> None:
    check_served_model(Endpoint(server.url), str(smollm2_path), "--model", gguf_on_disk)
    check_served_model(Endpoint(server.url), "smollm2-135m", "--model", gguf_on_disk)


@pytest.mark.slow
def test_a_registry_model_not_pulled_is_judged_without_pulling_it(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))  # no model is on disk there
    monkeypatch.setattr(download, "pull", lambda *a, **k: pytest.fail("the check pulled a model"))
    check_served_model(
        Endpoint(server.url), "smollm2-135m", "--model", gguf_on_disk
    )  # its probe ends match: no false alarm
    with pytest.raises(ConfigError, match=r"not that of qwen2\.5-coder-0\.5b; pass --prm naming"):
        check_served_model(Endpoint(server.url), "qwen2.5-coder-0.5b", "--prm", gguf_on_disk)


def test_every_registry_model_has_its_probe_ends(smollm2_path: Path) -> None:
    """A registry model without them would be pulled before its check; those on disk are read to
    confirm them."""
    assert set(REGISTRY_PROBE_ENDS) == set(models.REGISTRY)
    on_disk = [name for name, spec in models.REGISTRY.items() if models.is_cached(spec)]
    assert "smollm2-135m" in on_disk
    for name in on_disk:
        ids = load_vocab(str(models.cache_path(models.REGISTRY[name]))).tokenize(
            PROBE, add_bos=False, special=True
        )
        assert (ids[0], ids[-1]) == REGISTRY_PROBE_ENDS[name], name


# ---------------------------------------------------------------- other servers' tokenize endpoints
class Tokenizing(JSONHandler):
    """/v1/models, and /tokenize as llama.cpp's server (`content`) or vLLM (`prompt`, `model`) reads
    it, with the real SmolLM2 tokenizer; `style` "none": a server without a tokenize endpoint (404),
    "odd": one whose /tokenize refuses these bodies (422)."""

    style = "llama.cpp"
    vocab: Any = None
    served = "SmolLM2-135M-Instruct"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.answer(200, {"object": "list", "data": [{"id": self.served, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path != "/tokenize" or self.style == "none":
            self.answer(404, {"detail": "Not Found"})
        elif self.style == "odd":
            self.answer(422, {"detail": "unexpected body"})
        elif self.style == "llama.cpp":
            tokens = self.vocab.tokenize(
                body["content"],
                add_bos=body.get("add_special", False),
                special=body.get("parse_special", True),
            )
            self.answer(200, {"tokens": tokens})
        elif body.get("model") != self.served:  # vLLM: an unknown model is a 404
            self.answer(404, {"error": {"message": "model does not exist"}})
        else:
            self.answer(
                200,
                {
                    "count": 0,
                    "tokens": self.vocab.tokenize(
                        body["prompt"], add_bos=body.get("add_special_tokens", True), special=True
                    ),
                },
            )


@pytest.fixture()
def tokenizing(smollm2: Any) -> Iterator[str]:
    Tokenizing.vocab = smollm2
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Tokenizing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("style", ["llama.cpp", "vllm"])
def test_llama_cpp_and_vllm_tokenize_endpoints_are_read(
    style: str,
    tokenizing: str,
    smollm2_path: Path,
    other_gguf: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Tokenizing, "style", style)
    check_served_model(Endpoint(tokenizing), str(smollm2_path), "--model", gguf_on_disk)
    with pytest.raises(
        ConfigError, match=r"serves 'SmolLM2-135M-Instruct', whose tokenizer is not that of "
    ):
        check_served_model(Endpoint(tokenizing), str(other_gguf), "--model", gguf_on_disk)


@pytest.mark.parametrize("style", ["none", "odd"])
def test_a_server_without_a_usable_tokenize_endpoint_is_not_judged(
    style: str, tokenizing: str, other_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Tokenizing, "style", style)
    client = CompletionClient(Endpoint(tokenizing, retries=3))
    try:
        assert served_tokens(client, PROBE) is None
        assert client.stats.retries == 0  # an error answer there is no failure to retry
    finally:
        client.close()
    # no evidence: no alarm
    check_served_model(Endpoint(tokenizing), str(other_gguf), "--model", gguf_on_disk)
