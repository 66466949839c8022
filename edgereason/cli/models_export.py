"""`edgereason models export NAME --format hf DIR`: a registry model (pulled as `models pull` pulls it) or a .gguf
written out as a Hugging Face folder, for vLLM, SGLang or transformers, and for `--model hf:DIR` on torch.

The folder is written into a hidden temp folder beside DIR and renamed to DIR once whole: a stopped export (Ctrl-C,
a full disk) leaves DIR as it was (absent, empty, or with --force the folder it replaces). A process killed
outright (SIGKILL) leaves its `.DIR.export-*` folder behind. The free space is checked against the estimated size
first: the weights dequantized to the dtype, and the vocabulary (from the GGUF's header) spelled out in JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgereason import models
from edgereason.backends.transformers import export
from edgereason.backends.transformers.export import DTYPE_BYTES, DTYPES
from edgereason.cli.progress import pull_progress
from edgereason.errors import ConfigError, ModelError
from edgereason.models.gguf_file import GGUFFormatError, GGUFHeader, read_header

VOCABULARY_IN_JSON = 4  # tokenizer.json spells the vocabulary and merges in about this many times their GGUF bytes
JSON_HELP = (
    'print one JSON object, {"path", "bytes", "dtype", "architecture", "files"} (on a failure: error, exit_code)'
)


def register(msub: argparse._SubParsersAction) -> None:
    ep = msub.add_parser(
        "export",
        help="write a model as a Hugging Face folder (safetensors, config, tokenizer, chat template)",
        description="Dequantize a registry model (pulled first if needed) or a .gguf into a Hugging Face folder that "
        "vLLM, SGLang and transformers read, and that `--model hf:DIR --backend torch` runs. Needs torch and "
        'transformers: pip install "edgereason[torch]".',
    )
    ep.add_argument("name", help="registry name or .gguf path")
    ep.add_argument("dir", type=Path, help="the folder to write (absent or empty, unless --force)")
    ep.add_argument("--format", choices=["hf"], default="hf", help="hf: a Hugging Face folder (the one format)")
    ep.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="the weights' dtype (default: bfloat16)")
    ep.add_argument("--force", action="store_true", help="replace DIR when it holds files (once the export is whole)")
    ep.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    ep.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from edgereason.cli.models_cmd import announce_pull  # that module imports this one, to register its parser

    target = Path(os.path.abspath(args.dir.expanduser()))
    check_target(target, args.force)
    export.require_libraries()
    announce_pull(args.name)
    gguf = models.resolve(args.name, progress=pull_progress, whole=True)
    header = gguf_header(gguf)
    need = estimated_bytes(header, args.dtype)
    check_room(target, need)
    config = export.read_config(gguf)
    note(
        f"exporting {gguf.name} ({config.model_type}, {header.n_elements / 1e9:.2f}B parameters) as {args.dtype} "
        f"into {target}: about {models.human_size(need)}"
    )
    with staging_folder(target) as staging:
        architecture = export.write_hf_folder(gguf, staging, args.dtype, note=note, config=config)
        move_into_place(staging, target)
    files = sorted(p.name for p in target.iterdir())
    size = sum((target / name).stat().st_size for name in files)
    note(f"wrote {len(files)} files, {models.human_size(size)}, into {target}")
    summary = {"path": str(target), "bytes": size, "dtype": args.dtype, "architecture": architecture, "files": files}
    print(json.dumps(summary) if args.json else target)
    return 0


def note(line: str) -> None:
    print(f"edgereason: {line}", file=sys.stderr, flush=True)


def check_target(target: Path, force: bool) -> None:
    """DIR may be absent or an empty folder; a folder with files only with --force; never a file."""
    if target.is_dir():
        if not force and any(target.iterdir()):
            raise ConfigError(f"{target} exists and is not empty; name a new folder, or pass --force to replace it")
    elif target.exists() or target.is_symlink():
        raise ConfigError(f"{target} exists and is not a folder; name a folder to write the model into")


def gguf_header(gguf: Path) -> GGUFHeader:
    try:
        return read_header(gguf)
    except (GGUFFormatError, OSError) as e:
        raise ModelError(f"cannot read the header of {gguf} ({e})") from None


def estimated_bytes(header: GGUFHeader, dtype: str) -> int:
    """The folder's size: every tensor value in `dtype`, and the tokenizer (the GGUF's header, mostly vocabulary)."""
    return header.n_elements * DTYPE_BYTES[dtype] + VOCABULARY_IN_JSON * header.data_start


def existing_folder(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists: where the new folder will take its room."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_room(target: Path, need: int) -> None:
    where = existing_folder(target.parent)
    free = shutil.disk_usage(where).free
    if free < need:
        raise ConfigError(
            f"not enough disk space in {where}: the export takes about {models.human_size(need)} and "
            f"{models.human_size(free)} is free; free some room or name a folder on a larger disk"
        )


@contextmanager
def staging_folder(target: Path) -> Iterator[Path]:
    """A hidden folder beside `target` to write into, removed unless it became `target` (the CLI turns Ctrl-C and
    SIGTERM into exceptions, so this runs then too); a write that fails is one line."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    except OSError as e:
        raise ConfigError(
            f"cannot write into {target.parent}: {e.strerror or e}; name a folder you can write"
        ) from None
    try:
        yield staging
    except OSError as e:  # a full disk (the estimate fell short) or a quota half-way
        raise ModelError(f"could not write the folder {target}: {e.strerror or e}; nothing was left there") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def move_into_place(staging: Path, target: Path) -> None:
    """Rename the whole folder to `target`, replacing an empty folder or (with --force) a full one, which is only
    removed once the new one stands in its place."""
    readable_by_all(staging)
    if not target.is_dir() or not any(target.iterdir()):
        os.replace(staging, target)  # replaces an empty folder in one step
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
    os.replace(target, old / target.name)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(old / target.name, target)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def readable_by_all(folder: Path) -> None:
    """The modes a folder made with mkdir and files made with open get (safetensors and mkdtemp make theirs
    private), so a server running as another user can read the model."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
