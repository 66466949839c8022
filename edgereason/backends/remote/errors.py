"""The remote backend's errors: one line each, naming the server (as `Endpoint.root` shows it)."""

from __future__ import annotations

from edgereason.errors import EdgeReasonError


class RemoteError(EdgeReasonError):
    """The server refused a request, answered something unreadable, or could not be reached."""


class Unreachable(RemoteError):
    """No answer after every retry (refused, reset, timed out, 5xx): the server is down or stopped
    answering."""

    def __init__(self, root: str, detail: str, tries: int) -> None:
        tried = f"{tries} tries" if tries > 1 else "1 try"
        super().__init__(
            f"cannot reach the server at {root} ({detail}) after {tried}; is it running?"
        )
        self.root = root
        self.detail = detail


def unreadable(root: str, path: str, what: str) -> RemoteError:
    """An answer that is not what an OpenAI-compatible server gives (`what`: a few words on it)."""
    return RemoteError(
        f"the server at {root} answered {path} with {what}; is it an OpenAI-compatible server?"
    )
