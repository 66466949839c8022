"""util/terminal.safe_text: no control character of untrusted text reaches the terminal raw."""

from __future__ import annotations

from pathlib import Path

from edgereason.util.terminal import safe_text, shown_path

C0 = [chr(c) for c in range(0x20) if chr(c) not in "\n\t"]
C1 = [chr(c) for c in range(0x7F, 0xA0)]
SEQUENCES = [
    "\x1b]0;owned\x07",  # window title
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b[31mred\x1b[0m",
    "\x1b]8;;http://example.invalid\x1b\\link\x1b]8;;\x1b\\",  # OSC-8 hyperlink
    "\x9b31m",  # 8-bit CSI
    "line\roverwritten",
    "a\bb",
    "\u202eevil",
]


def test_every_control_character_is_escaped_and_visible() -> None:
    for ch in C0 + C1:
        out = safe_text(f"a{ch}b")
        assert not any(c in out for c in C0 + C1), repr(out)
        assert out == f"a\\x{ord(ch):02x}b"


def test_escape_sequences_arrive_as_text() -> None:
    for seq in SEQUENCES:
        out = safe_text(seq)
        assert "\x1b" not in out and "\x9b" not in out and "\r" not in out and "\u202e" not in out
    assert safe_text("\x1b[2J") == "\\x1b[2J"
    assert safe_text("\u202eevil") == "\\u202eevil"


def test_layout_and_ordinary_text_are_kept() -> None:
    text = "Step 1: 16 - 3 = 13\n\n\tso $\\boxed{18}$ — ünïcode, 中文, emoji 🙂"
    assert safe_text(text) == text


def test_one_line_escapes_line_breaks_and_tabs() -> None:
    assert safe_text("a\nb\tc", one_line=True) == "a\\x0ab\\x09c"
    assert "\n" not in safe_text("server said:\nEVIL\x1b[2J", one_line=True)


def test_a_path_is_shown_on_one_line_with_its_escapes_visible() -> None:
    assert shown_path(Path("/tmp/out\x1b[31m\nred")) == "/tmp/out\\x1b[31m\\x0ared"
    assert shown_path("bench-out/é") == "bench-out/é"
