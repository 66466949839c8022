"""`edgereason models export NAME --format hf DIR`: a registry model (pulled as `models pull` pulls
it) or a .gguf written out as a Hugging Face folder, for vLLM, SGLang or transformers, and for
`--model hf:DIR` on torch.

The flags, the notes and the summary; the checks, the staging folder and the move into place are
models/export.py's, the writing the transformers backend's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from edgereason import models
from edgereason.backends.transformers import export
from edgereason.backends.transformers.export import DTYPE_BYTES, DTYPES
from edgereason.cli.progress import pull_progress
from edgereason.cli.pull_notice import announce_pull
from edgereason.models import export as staged
from edgereason.util.terminal import shown_path

JSON_HELP = (
    'print one JSON object, {"path", "bytes", "dtype", "architecture", "files"} (on a failure: '
    "error, exit_code)"
)


def register(msub: argparse._SubParsersAction) -> None:
    ep = msub.add_parser(
        "export",
        help="write a model as a Hugging Face folder (safetensors, config, tokenizer, chat "
        "template)",
        description="Dequantize a registry model (pulled first if needed) or a .gguf into a "
        "Hugging Face folder that vLLM, SGLang and transformers read, and that "
        "`--model hf:DIR --backend torch` runs. Needs torch and transformers: "
        'pip install "edgereason[torch]".',
    )
    ep.add_argument("name", help="registry name or .gguf path")
    ep.add_argument("dir", type=Path, help="the folder to write (absent or empty, unless --force)")
    ep.add_argument(
        "--format", choices=["hf"], default="hf", help="hf: a Hugging Face folder (the one format)"
    )
    ep.add_argument(
        "--dtype", choices=DTYPES, default="bfloat16", help="the weights' dtype (default: bfloat16)"
    )
    ep.add_argument(
        "--force",
        action="store_true",
        help="replace DIR when it holds files (once the export is whole)",
    )
    ep.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    ep.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    target = Path(os.path.abspath(args.dir.expanduser()))
    staged.check_target(target, args.force)
    export.require_libraries()
    announce_pull(args.name)
    gguf = models.resolve(args.name, progress=pull_progress, whole=True)
    header = staged.gguf_header(gguf)
    need = staged.estimated_bytes(header, DTYPE_BYTES[args.dtype])
    staged.check_room(target, need)
    config = export.read_config(gguf)
    note(
        f"exporting {shown_path(gguf.name)} ({config.model_type}, "
        f"{header.n_elements / 1e9:.2f}B parameters) as {args.dtype} "
        f"into {shown_path(target)}: about {models.human_size(need)}"
    )

    def write(staging: Path) -> str:
        return export.write_hf_folder(gguf, staging, args.dtype, note=note, config=config)

    written = staged.write_folder(target, write)
    size = models.human_size(written.bytes)
    note(f"wrote {len(written.files)} files, {size}, into {shown_path(target)}")
    summary = {
        "path": str(target),
        "bytes": written.bytes,
        "dtype": args.dtype,
        "architecture": written.architecture,
        "files": written.files,
    }
    # the folder's exact name is in --json
    print(json.dumps(summary) if args.json else shown_path(target))
    return 0


def note(line: str) -> None:
    print(f"edgereason: {line}", file=sys.stderr, flush=True)
