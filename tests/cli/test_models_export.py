"""`edgereason models export NAME --format hf DIR` on the real SmolLM2 GGUF, run as a user runs it:
the folder it writes read back by the torch backend (`hf:DIR`) and by transformers (what vLLM and
SGLang load with) beside the GGUF: the same logits (float32: to rounding; bf16: to bf16's
precision), tokens, chat template and end-of-turn tokens; a search on it; and each bad input as one
line, leaving nothing half-written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from edgereason.backends.context_roles import DecodeItem
from edgereason.backends.torch.runtime import TorchContext
from edgereason.cli.main import main
from edgereason.prompts import solve_messages

QUESTION = "Janet's ducks lay 16 eggs per day. She eats three for breakfast. How many are left?"
SMALL = (
    "--beams",
    "2",
    "--width",
    "2",
    "--max-steps",
    "1",
    "--max-step-tokens",
    "8",
    "--kv-tokens",
    "512",
    "--json",
)
FILES = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
]


def edgereason(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args],
        capture_output=True,
        text=True,
        timeout=600,
        **kwargs,
    )


def export(name: str, folder: Path, *flags: str) -> tuple[dict, str]:
    proc = edgereason("models", "export", name, "--format", "hf", str(folder), "--json", *flags)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
def float32_export(smollm2_path, tmp_path_factory) -> tuple[Path, dict, str]:
    """By registry name, into an empty folder that is there already."""
    folder = tmp_path_factory.mktemp("export") / "smollm2-f32"
    folder.mkdir()
    return (folder, *export("smollm2-135m", folder, "--dtype", "float32"))


@pytest.fixture(scope="module")
def bf16_export(smollm2_path, tmp_path_factory) -> tuple[Path, dict, str]:
    """By .gguf path, in the default dtype, with --force over a folder holding a file from
    before."""
    folder = tmp_path_factory.mktemp("export") / "smollm2-bf16"
    folder.mkdir()
    (folder / "stale.txt").write_text("from an earlier export")
    return (folder, *export(str(smollm2_path), folder, "--force"))


@pytest.fixture(scope="module")
def gguf_model(smollm2_path):
    from edgereason.backends.torch.model import load_model

    return load_model(str(smollm2_path), "cpu")


def logits(model, ids: list[int]) -> torch.Tensor:
    """Every position's logits on the torch backend (float32 on the CPU)."""
    ctx = TorchContext(model, 256)
    try:
        return ctx.forward([DecodeItem(ctx.new_seq(), ids, [(i, i) for i in range(len(ids))])])[1]
    finally:
        ctx.close()


def prompt_ids(model) -> list[int]:
    return model.tokenize(model.apply_chat_template(solve_messages(QUESTION)), add_bos=False)


@pytest.mark.parametrize(
    "which, dtype", [("float32_export", "float32"), ("bf16_export", "bfloat16")]
)
def test_json_describes_the_whole_folder_and_nothing_is_left_beside_it(request, which, dtype):
    folder, summary, stderr = request.getfixturevalue(which)
    assert summary == {
        "path": str(folder),
        "bytes": sum(p.stat().st_size for p in folder.iterdir()),
        "dtype": dtype,
        "architecture": "llama",
        "files": FILES,  # the stale file --force replaced is gone with its folder
    }
    # no temp folder beside it
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]
    umask = os.umask(0)
    os.umask(umask)
    # a server's user reads it
    assert (folder / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (
        "edgereason: exporting SmolLM2-135M-Instruct.Q4_1.gguf (llama, 0.13B parameters)" in stderr
    )
    assert "edgereason: wrote 5 files, " in stderr


def test_the_float32_folder_gives_the_gguf_logits_on_torch_and_transformers(
    float32_export, smollm2_path, gguf_model
):
    """float32 holds the dequantized GGUF values exactly: the torch backend's logits agree to
    float32 rounding, and transformers (the library vLLM and SGLang read a folder's config and
    weights with) computes from the folder what it computes from the GGUF."""
    from transformers import AutoModelForCausalLM

    from edgereason.backends.torch.model import load_model

    folder = float32_export[0]
    ids = prompt_ids(gguf_model)
    expected = logits(gguf_model, ids)
    assert expected.std() > 1.0
    torch.testing.assert_close(
        logits(load_model(str(folder), "cpu"), ids), expected, atol=1e-4, rtol=1e-5
    )
    served = []
    for where, source in ((folder, {}), (smollm2_path.parent, {"gguf_file": smollm2_path.name})):
        model = AutoModelForCausalLM.from_pretrained(
            where, dtype=torch.float32, local_files_only=True, **source
        )
        with torch.no_grad():
            served.append(model.eval()(torch.tensor([ids])).logits[0])
    torch.testing.assert_close(served[0], served[1], atol=1e-5, rtol=1e-5)
    # the torch backend keeps its KV in float16 on the CPU, as llama.cpp does; transformers in
    # float32
    assert (served[0].argmax(-1) == expected.argmax(-1)).float().mean() > 0.98


def test_the_bf16_folder_gives_the_gguf_logits_to_bf16_precision(bf16_export, gguf_model):
    """bf16 keeps 8 of float32's 24 significant bits: each weight moves by up to 2^-9 of itself, and
    30 layers of such rounding move the logits by a few hundredths of their spread, not more, and
    leave the greedy token."""
    from edgereason.backends.torch.model import load_model

    ids = prompt_ids(gguf_model)
    expected, got = logits(gguf_model, ids), logits(load_model(str(bf16_export[0]), "cpu"), ids)
    assert not torch.equal(got, expected)  # rounded: not the float32 weights
    assert (got - expected).abs().max() < 0.1 * expected.std()
    assert (got.argmax(-1) == expected.argmax(-1)).float().mean() > 0.97
    assert got[-1].argmax() == expected[-1].argmax()


@pytest.mark.parametrize("which", ["float32_export", "bf16_export"])
def test_tokens_chat_template_and_stops_agree_with_the_gguf(
    request, which, smollm2_path, smollm2, gguf_model
):
    """The GGUF's chat template is the folder's, where every transformers version reads it;
    generation_config's EOS ids are llama.cpp's end-of-turn tokens (<|im_end|>, <|endoftext|>), so a
    server stops where llama.cpp does; the rope base is in the key transformers 4 reads too."""
    from gguf import GGUFReader

    from edgereason.backends.torch.model import load_model

    folder = request.getfixturevalue(which)[0]
    metadata = GGUFReader(str(smollm2_path)).fields
    template = metadata["tokenizer.chat_template"].contents()
    assert json.loads((folder / "tokenizer_config.json").read_text())["chat_template"] == template
    stops = json.loads((folder / "generation_config.json").read_text())["eos_token_id"]
    assert set(stops) == {smollm2.tokenize("<|im_end|>")[0], smollm2.tokenize("<|endoftext|>")[0]}
    assert set(stops) <= smollm2.eog_ids
    config = json.loads((folder / "config.json").read_text())
    assert config["rope_theta"] == pytest.approx(metadata["llama.rope.freq_base"].contents())
    exported = load_model(str(folder), "cpu")
    chat = gguf_model.apply_chat_template(solve_messages(QUESTION))
    assert exported.apply_chat_template(solve_messages(QUESTION)) == chat
    assert exported.tokenize(chat) == gguf_model.tokenize(chat) == smollm2.tokenize(chat)
    assert exported.eog_ids == set(stops)


@pytest.mark.slow  # a search in float32 torch on the CPU
def test_solve_runs_the_exported_folder_on_torch(bf16_export):
    proc = edgereason(
        "solve", "What is 2+3?", "--model", f"hf:{bf16_export[0]}", "--backend", "torch", *SMALL
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["backend"] == "torch" and out["metrics"]["prm_calls"] > 0


def one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1 and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    return lines[0]


def test_a_folder_with_files_is_refused_without_force(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    line = one_error_line(
        edgereason("models", "export", "smollm2-135m", "--format", "hf", str(folder)), 2
    )
    assert line.endswith(
        f"error: {folder} exists and is not empty; name a new folder, or pass --force to replace it"
    )
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    (tmp_path / "file").write_text("")
    line = one_error_line(
        edgereason("models", "export", "smollm2-135m", str(tmp_path / "file"), "--force"), 2
    )
    assert line.endswith(
        f"{tmp_path / 'file'} exists and is not a folder; name a folder to write the model into"
    )


def test_an_unknown_name_is_one_line(tmp_path):
    proc = edgereason("models", "export", "nosuch", str(tmp_path / "out"), "--json")
    line = one_error_line(proc, 2)
    assert line.startswith("edgereason: error: unknown model 'nosuch'; known: smollm2-135m")
    assert json.loads(proc.stdout)["exit_code"] == 2 and not (tmp_path / "out").exists()


def test_an_architecture_transformers_cannot_read_is_one_line(tmp_path):
    """rwkv6: llama.cpp runs it, transformers' GGUF loader does not; refused before any folder is
    made."""
    import gguf
    import numpy as np

    path = tmp_path / "rwkv.gguf"
    writer = gguf.GGUFWriter(str(path), "rwkv6")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    line = one_error_line(edgereason("models", "export", str(path), str(tmp_path / "out")), 1)
    assert (
        "cannot read" in line
        and "(GGUF model with architecture rwkv6 is not supported yet.)" in line
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rwkv.gguf"]


def test_too_little_free_space_is_refused_before_writing(
    tmp_path, smollm2_path, monkeypatch, capsys
):
    """The refusal is simulated (no small file system is mounted here): the disk reports 100 MB
    free, less than the bf16 export's 270 MB."""
    from edgereason.models import export

    free = export.shutil.disk_usage(tmp_path)._replace(free=100_000_000)
    monkeypatch.setattr(export.shutil, "disk_usage", lambda path: free)
    assert main(["models", "export", str(smollm2_path), str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"edgereason: error: not enough disk space in {tmp_path}: the export takes about 276 MB "
        "and 100 MB is "
        "free; free some room or name a folder on a larger disk\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_missing_torch_extra_is_one_line(tmp_path):
    """transformers made unimportable in the child, as where the torch extra is not installed."""
    code = (
        "import sys; sys.modules['transformers'] = None; from edgereason.cli.main import main; "
        "sys.exit(main())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "models", "export", "smollm2-135m", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = one_error_line(proc, 2)
    assert line == (
        "edgereason: error: models export needs transformers, which is not installed: pip install "
        '"edgereason[torch]"'
    )


def test_ctrl_c_leaves_the_folder_as_it_was(tmp_path, smollm2_path):
    """Stopped while it writes its temp folder beside DIR: with --force over a full folder, DIR
    keeps its files, and the temp folder is gone."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    command = [
        sys.executable,
        "-m",
        "edgereason",
        "models",
        "export",
        str(smollm2_path),
        str(folder),
        "--force",
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while (
        not list(tmp_path.glob(".out.export-*"))
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert proc.poll() is None, "the export ended before it was interrupted"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert stderr.rstrip().endswith("edgereason: interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
