"""What a server said when it refused a request, on one line and safe to print: kept apart from the
client (client.py) so the request loop reads as retries and answers, and these rules of quoting a
server's untrusted text live in one place. An error answer's body was cut at ERROR_BYTES where it
came in (bounded_answer.py)."""

from __future__ import annotations

import json
from typing import Any

from edgereason.backends.remote.bounded_answer import Answer
from edgereason.util.terminal import safe_text

MESSAGE_CHARS = 300  # the most of a server's error message quoted


def redirect_to(answer: Answer) -> str:
    """Where a redirect leads, as a hint to give that address instead."""
    location = safe_text(answer.headers.get("location", "")[:MESSAGE_CHARS], one_line=True)
    return f" (to {location}); give that address as the server's URL" if location else ""


def server_message(answer: Answer) -> str:
    """The server's error message on one line, made safe to print (OpenAI style
    `{"error": {"message": ...}}`, `{"error": "..."}`, FastAPI's `detail`)."""
    try:
        text = _said(json.loads(answer.body)) or answer.text
    # not JSON (cut short, for one); or nested past Python's depth, to read or print
    except (ValueError, RecursionError):
        text = answer.text
    line = " ".join(text.split())
    cut = "..." if len(line) > MESSAGE_CHARS else ""
    return safe_text(line[:MESSAGE_CHARS], one_line=True) + cut


def _said(data: Any) -> str | None:
    """The message in an error answer's JSON, where it holds one."""
    if not isinstance(data, dict):
        return None
    error, detail = data.get("error"), data.get("detail")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str) and error:
        return error
    if detail:
        return detail if isinstance(detail, str) else json.dumps(detail)
    return None


def refusal_hint(status: int, message: str) -> str:
    """What to change for a refusal the user can fix, where the status and message show which."""
    if status == 400 and "context" in message.lower():  # a prompt longer than the server's context
        return (
            " (start that server with a longer context: llama-server -c, llama-cpp-python --n_ctx, "
            "vLLM --max-model-len)"
        )
    if status == 404:
        return " (check --base-url and --served-model)"
    if status in (401, 403):
        return " (check --api-key-env)"
    if status == 422:  # FastAPI's refusal of a body's fields: a prompt sent as token ids, for one
        return (
            " (prompts go as token ids; llama-cpp-python's own server takes them only as "
            "python -m edgereason.backends.remote.llamacpp_server)"
        )
    return ""
