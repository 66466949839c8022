"""Credentials kept out of everything shown or stored: messages, logs, result files.

A URL may carry them (`http://user:password@host`, a token as the user alone): each such URL is
shown as `http://***@host`, so the user still sees that credentials were given. An API key's value,
where one is known, is shown as `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# a scheme, then userinfo up to the host's "@" (urlsplit takes the last "@" before the path, as this
# does)
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s]*@")


def hide_credentials(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with the credentials of every URL in it, and each of `secrets` (an API key's
    value), as ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _USERINFO.sub(r"\1***@", text)
