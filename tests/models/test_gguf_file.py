"""The size a GGUF file's header describes: exact for a real model, and a damaged header is one
error, not a hang or a struct.error."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from edgereason.models.gguf_file import GGUFFormatError, expected_size


def gguf_string(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def tiny_gguf(alignment: int | None = None) -> bytes:
    """One F32 tensor of 10 elements (40 bytes) at offset 0; a general.alignment where given."""
    metadata = [gguf_string("general.name") + struct.pack("<I", 8) + gguf_string("tiny")]
    if alignment is not None:
        metadata.append(gguf_string("general.alignment") + struct.pack("<II", 4, alignment))
    header = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 1, len(metadata))
        + b"".join(metadata)
        + gguf_string("t")
        + struct.pack("<IQIQ", 1, 10, 0, 0)
    )
    padding = -len(header) % (alignment or 32)
    return header + b"\0" * padding + b"\1" * 40


def test_a_real_model_is_as_long_as_its_header_says(smollm2_path: Path) -> None:
    assert expected_size(smollm2_path) == smollm2_path.stat().st_size


@pytest.mark.parametrize("alignment", [None, 32, 64, 256])
def test_the_tensor_data_starts_at_the_alignment_the_header_gives(tmp_path, alignment) -> None:
    data = tiny_gguf(alignment)
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data)
    assert expected_size(path) == len(data)
    path.write_bytes(data[:-1])
    assert expected_size(path) == len(data)  # the size the caller compares with the file's


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda d: d[:50], "the file ends inside its header"),
        (lambda d: d[:4] + struct.pack("<I", 1) + d[8:], "GGUF version 1"),
        # would loop for minutes
        (lambda d: d[:8] + struct.pack("<Q", 2**62) + d[16:], "more than the file holds"),
        (lambda d: d[:16] + struct.pack("<Q", 2**40) + d[24:], "more than the file holds"),
        (lambda d: b"GGUX" + d[4:], "not a GGUF file"),
    ],
)
def test_a_damaged_header_is_one_error(tmp_path, damage, why) -> None:
    path = tmp_path / "damaged.gguf"
    path.write_bytes(damage(tiny_gguf()))
    with pytest.raises(GGUFFormatError, match=why):
        expected_size(path)


def test_the_header_gives_the_metadata_and_the_tensor_values_gguf_py_reads(
    smollm2_path: Path,
) -> None:
    """What `models export` estimates its folder from: the values every tensor holds, and the scalar
    and string metadata (the architecture, the chat template), as gguf-py's full reader finds
    them."""
    from gguf import GGUFReader

    from edgereason.models.gguf_file import read_header

    header, reader = read_header(smollm2_path), GGUFReader(str(smollm2_path))
    assert header.n_elements == sum(int(t.n_elements) for t in reader.tensors) > 100_000_000
    for key in (
        "general.architecture",
        "tokenizer.chat_template",
        "llama.rope.freq_base",
        "llama.block_count",
    ):
        assert header.metadata[key] == reader.fields[key].contents()
    assert "tokenizer.ggml.tokens" not in header.metadata  # an array: skipped
    assert header.data_start == reader.data_offset and header.size == smollm2_path.stat().st_size
