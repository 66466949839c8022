"""docs/design.md section 2 against the code it describes: each call it writes out for the
Generator or the Verifier (`new_seq() -> SeqId`) names the parameters and the return type that
edgereason/protocols.py declares, so the map cannot drift from the contract unseen."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from edgereason.protocols import Generator, Verifier

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"
# `name(params)` with an optional ` -> return`, inside one pair of backticks
CALL = re.compile(r"`(\w+)\(([^`]*)\)(?: -> ([^`]+))?`")


def _section_two() -> str:
    text = DESIGN.read_text()
    return text.split("\n## 2. ", 1)[1].split("\n## 3. ", 1)[0]


def _top_level_names(params: str) -> list[str]:
    """`batch: list[(SeqId, ids)], samples` -> ["batch", "samples"]: commas inside brackets do not
    split."""
    names, depth, current = [], 0, ""
    for char in params + ",":
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            names.append(current.split(":", 1)[0].strip())
            current = ""
        else:
            current += char
    return [name for name in names if name]


def _written_calls() -> list[tuple[str, list[str], str | None]]:
    members = {**dict(inspect.getmembers(Generator)), **dict(inspect.getmembers(Verifier))}
    calls = []
    for name, params, returns in CALL.findall(_section_two()):
        if callable(members.get(name)) and not name.startswith("_"):
            calls.append((name, _top_level_names(params), returns or None))
    return calls


def _declared(name: str) -> inspect.Signature:
    holder = Generator if hasattr(Generator, name) else Verifier
    return inspect.signature(getattr(holder, name))


def test_the_design_writes_out_the_protocols_main_calls() -> None:
    written = {name for name, _, _ in _written_calls()}
    assert {"new_seq", "fork", "step", "score"} <= written, written


def test_each_written_call_has_the_protocols_parameters_and_return() -> None:
    wrong = []
    for name, params, returns in _written_calls():
        declared = _declared(name)
        names = [p for p in declared.parameters if p != "self"]
        required = [p for p in names if declared.parameters[p].default is inspect.Parameter.empty]
        # the map may leave out a parameter that has a default, never one the caller must pass
        if params != names[: len(params)] or len(params) < len(required):
            wrong.append(f"{name}({', '.join(params)}): protocols.py has ({', '.join(names)})")
        if returns is not None and returns != declared.return_annotation:
            wrong.append(f"{name} -> {returns}: protocols.py has -> {declared.return_annotation}")
    assert not wrong, wrong
