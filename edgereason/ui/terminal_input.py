"""What the chat does to the terminal's input before the app starts."""

from __future__ import annotations

import codecs
import functools


def decode_terminal_input_leniently() -> None:
    """Textual's terminal driver decodes keyboard input as strict UTF-8 in its input thread: one
    byte that is not UTF-8 (a Latin-1 paste, a terminal set to another encoding) ends that thread
    with a traceback and the app with it. Rule, as for all text from outside
    (edgereason/util/text.py): such bytes become U+FFFD."""
    from textual.drivers import linux_driver

    strict = codecs.getincrementaldecoder
    linux_driver.getincrementaldecoder = lambda encoding: functools.partial(
        strict(encoding), errors="replace"
    )
