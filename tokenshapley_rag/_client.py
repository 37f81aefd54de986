"""A thin client of the attribution service (``tokenshapley serve``).

A new process pays for importing torch and loading the model before its first answer
(seconds; docs/reports/performance.md, "Start-up"). The service keeps both loaded, so a
command that only sends the texts and prints the answer it gets back starts in the time
of the package import. This module imports nothing heavy: the standard library's HTTP
client and the input types.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from urllib.parse import urlsplit

from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import AttributionServiceError, InvalidInputError

__all__ = ["ACCEPT", "attribute_remote", "service_url"]

#: The ``Accept`` type that asks the service for each output format of the CLI.
ACCEPT = {"json": "application/json", "markdown": "text/markdown", "html": "text/html"}


def service_url(url: str, option: str = "--server") -> str:
    """``url`` checked as the base URL of a service (``http`` or ``https``, a host), without
    a trailing slash.

    >>> service_url("http://127.0.0.1:8765/")
    'http://127.0.0.1:8765'
    >>> service_url("127.0.0.1:8765")
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.InvalidInputError: --server must be an http:// or https:// URL such as http://127.0.0.1:8765, got '127.0.0.1:8765'
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(f"{option} must be an http:// or https:// URL such as http://127.0.0.1:8765, got {url!r}")
    return url.strip().rstrip("/")


def attribute_remote(
    url: str,
    *,
    query: str,
    sources: Sequence[Source],
    response: str,
    accept: str = ACCEPT["json"],
    token: str | None = None,
    timeout: float = 120.0,
) -> str:
    """POST one attribution to the service at ``url`` and return the body it answers (the
    result's JSON, markdown or HTML, by ``accept``).

    Raises :class:`AttributionServiceError`: ``code="unreachable"`` when nothing answers at
    ``url``, else the service's status, error code, message and field (an empty answer,
    sources over its size limits, a missing or wrong API token, ...).

    Examples
    --------
    >>> text = attribute_remote("http://127.0.0.1:8765", query="How tall is it?",
    ...     sources=[Source("eiffel", "The Eiffel Tower is 330 metres tall.")],
    ...     response="It is 330 metres tall.", accept=ACCEPT["markdown"])  # doctest: +SKIP
    """
    base = service_url(url)
    body = {
        "query": query,
        "answer": response,
        "sources": [
            {"id": s.id, "text": s.text, "metadata": dict(s.metadata), **({"document": s.document} if s.document else {})}
            for s in sources
        ],
    }
    headers = {"Content-Type": "application/json", "Accept": accept}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{base}/attribute", data=json.dumps(body, ensure_ascii=False).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read().decode("utf-8")
    except urllib.error.HTTPError as err:
        raise _service_error(err) from None
    except (urllib.error.URLError, OSError) as err:  # refused, unknown host, timed out
        reason = getattr(err, "reason", err)
        raise AttributionServiceError(
            f"no attribution service answers at {base} ({reason}); start one with `tokenshapley serve`"
        ) from None


def _service_error(err: urllib.error.HTTPError) -> AttributionServiceError:
    """The service's JSON error (``{"error", "message", "field"?}``) as a typed error."""
    try:
        data = json.loads(err.read().decode("utf-8"))
    except (ValueError, OSError):
        data = None
    if not isinstance(data, dict):
        return AttributionServiceError(f"the service answered HTTP {err.code} {err.reason}", status=err.code, code="http_error")
    return AttributionServiceError(
        f"the service refused the request (HTTP {err.code}, {data.get('error', 'error')}): {data.get('message', err.reason)}",
        status=err.code,
        code=str(data.get("error", "http_error")),
        field=data.get("field"),
    )
