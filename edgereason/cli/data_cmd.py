"""`edgereason data convert FILE`: a problem set in GSM8K's or MATH's own format as EdgeReason's
JSONL (the formats: search/formats.py); one line on stderr for each record skipped, and why."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edgereason.errors import ConfigError
from edgereason.search.formats import FORMATS, Skipped, convert_lines
from edgereason.util.data_lines import data_lines
from edgereason.util.files import check_no_dangling_link, write_text_atomic
from edgereason.util.terminal import shown_path

STDOUT = "-"  # --out -: stdout, as the FILE - is stdin


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="convert problem sets (GSM8K, MATH) into EdgeReason's JSONL",
        description="Problem sets for bench and train-prm.",
    )
    p.set_defaults(func=lambda args: _no_command(p))
    dsub = p.add_subparsers(dest="data_cmd", metavar="{convert}")
    c = dsub.add_parser(
        "convert",
        help="GSM8K's or MATH's own JSONL as EdgeReason's (problem, answer)",
        description="Write a JSONL problem set in GSM8K's format (question; answer ending in "
        "'#### N') or MATH's (problem; solution with \\boxed{answer}) as EdgeReason's: id, "
        "problem, answer, solution, source. Each record that cannot be converted is one line on "
        "stderr, with its line number and why.",
        epilog="example: edgereason data convert train.jsonl > gsm8k_train.jsonl "
        "(GSM8K's grade_school_math/data/train.jsonl)",
    )
    c.add_argument("input", metavar="FILE", help="the JSONL file, or - to read it from stdin")
    c.add_argument(
        "--out", metavar="FILE", help="where to write the set; - is stdout (default stdout)"
    )
    c.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="the input's format; auto = each record's own (default auto)",
    )
    c.set_defaults(func=run_convert)


def _no_command(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def run_convert(args: argparse.Namespace) -> int:
    name = "stdin" if args.input == "-" else shown_path(args.input)
    out = Path(args.out) if args.out not in (None, STDOUT) else None
    if out is not None and args.input != "-" and out.resolve() == Path(args.input).resolve():
        raise ConfigError(f"--out {out} is the input file; give another path")
    if out is None and sys.stdout is None:  # started with stdout closed (`>&-`)
        raise ConfigError("stdout is closed, so the converted set would be lost; give --out FILE")
    records, skipped = [], 0
    for item in convert_lines(data_lines(args.input), args.format):
        if isinstance(item, Skipped):
            skipped += 1
            print(f"edgereason: skipped {name}:{item.line}: {item.reason}", file=sys.stderr)
        else:
            records.append(item)
    if not records:
        why = f"{skipped} skipped; see the lines above"
        raise ConfigError(f"{name}: no record could be converted ({why})")
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if out is None:
        # flushed here, so a reader that quit (`| head`) stops the run (exit 141, cli/main.py)
        # before the claim below is made
        sys.stdout.write(lines)
        sys.stdout.flush()
    else:
        _write(out, lines)
    sources = sorted({r["source"] for r in records})
    where = shown_path(out) if out is not None else "stdout"
    note = f"converted {len(records)} records ({', '.join(sources)}) to {where}; skipped {skipped}"
    print(note, file=sys.stderr)
    return 0


def _write(out: Path, lines: str) -> None:
    check_no_dangling_link("--out", out)
    if out.is_dir():
        example = shown_path(out / "problems.jsonl")
        raise ConfigError(
            f"--out {shown_path(out)} is a folder; give a file path, such as {example}"
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, lines)
    except OSError as e:
        raise ConfigError(f"cannot write --out {shown_path(out)}: {e.strerror or e}") from None
