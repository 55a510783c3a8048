"""One HTTP source's calls: a pooled client on a loop of its own, a deadline over the
whole call, bounded retries, and an answer read with its bytes and depth capped.

The client (``httpx.AsyncClient``, keep-alive) is created on nautilus' HTTP loop (a
:class:`~nautilus_ranking.fanout.background_loop.BackgroundLoop`): an async client is
bound to one loop, and requests come from many (the synchronous API's, the service's, a
caller's ``asyncio.run``), so every call of every path runs there and shares it.

- **Deadline**: one ``asyncio`` deadline covers connecting, the headers and the body of
  every attempt (httpx's own timeouts are per read: a server sending a byte a second
  would hold a call for ever).
- **Retries**: only on 429, 502, 503 and 504, at most ``retries`` times, after the
  server's ``Retry-After`` (seconds or a date) when it gives one and a short back-off
  when not; a wait that would end past the deadline is not begun (the error says so).
- **Bounds**: the body is read as it streams in and refused past ``max_bytes``
  *decompressed* bytes (a gzip bomb is counted as it inflates); JSON nested deeper than
  ``max_depth`` is refused. Redirects are not followed unless the source says so.
"""

from __future__ import annotations

import asyncio
import atexit
import email.utils
import json
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.background_loop import BackgroundLoop
from nautilus_ranking.log import get_logger
from nautilus_ranking.sources.http.secrets import mask_library_logs, mask_url, scrub

if TYPE_CHECKING:
    import httpx

logger = get_logger("nautilus_ranking.sources.http")

EXTRA_HINT = "pip install 'nautilus-ranking[http]'"
#: Statuses worth another attempt: rate-limited, or a gateway between us and the engine.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: An answer's default cap (decompressed bytes): 30 hits of 10 kB are 300 kB.
DEFAULT_MAX_BYTES = 8 << 20
#: The highest cap a source may set (40 MiB, below 50 MB: an answer is hits, not a dump).
MAX_MAX_BYTES = 40 << 20
DEFAULT_MAX_DEPTH = 64
#: The first retry's wait when the server gives no Retry-After (doubled each time).
BACKOFF_S = 0.1
#: What of an error body a message quotes.
SHOWN_CHARS = 200
#: What of a body that is not JSON a message quotes.
SNIPPET_CHARS = 80


class HttpSourceError(NautilusError, RuntimeError):
    """An HTTP source's call failed: the message names the source, the call (its URL
    masked), the status and what failed."""


class HttpUnavailableError(HttpSourceError, ConnectionError):
    """The engine cannot be reached (connection refused, DNS, TLS)."""


def require_http() -> None:
    """Fail with the extra's name when httpx or jmespath is not installed."""
    try:
        import httpx  # noqa: F401
        import jmespath  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"HTTP sources need the http extra: {EXTRA_HINT} "
            f"({exc.name or 'httpx'} is not installed)"
        ) from exc


class TooLargeError(NautilusError, ValueError):
    """A body past its cap (``what``: declared, or streamed)."""

    def __init__(self, cap: int, what: str) -> None:
        super().__init__(f"larger than {cap:,} bytes ({what})")
        self.cap, self.what = cap, what


async def read_capped(
    response: httpx.Response, cap: int, progress: list[int] | None = None
) -> bytes:
    """The body of a streamed ``response``, decompressed, refused past ``cap`` bytes as
    it streams in (a declared ``Content-Length`` past it is refused before reading);
    ``progress[0]`` counts the bytes read so far (for a deadline's message)."""
    declared = response.headers.get("content-length", "")
    encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
    if declared.isdigit() and int(declared) > cap and not encoded:
        raise TooLargeError(cap, f"{int(declared):,} declared")
    raw = bytearray()
    async for chunk in response.aiter_bytes():
        raw += chunk
        if progress is not None:
            progress[0] = len(raw)
        if len(raw) > cap:
            raise TooLargeError(cap, "more streamed")
    return bytes(raw)


def too_deep(value: Any, cap: int) -> bool:
    """Whether a parsed JSON value nests containers deeper than ``cap`` (level by level:
    each container visited once, twice as fast as a stack of pairs on a 30-hit answer)."""
    level = [value] if type(value) in (dict, list) else []
    depth = 1
    while level:
        if depth > cap:
            return True
        deeper = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                kind = type(child)
                if kind is dict or kind is list:
                    deeper.append(child)
        level = deeper
        depth += 1
    return False


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); None when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class Endpoint:
    """Where and how one source calls (all from the sources file)."""

    source_id: str
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    verify: bool = True
    ca_file: str | None = None
    follow_redirects: bool = False
    retries: int = 2
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    pool_size: int = 8

    @property
    def secrets(self) -> list[str]:
        from nautilus_ranking.sources.http.secrets import url_secrets

        return [*self.headers.values(), *url_secrets(self.url)]

    @property
    def shown(self) -> str:
        return f"{self.method} {mask_url(self.url)}"


@dataclass
class Answer:
    status: int
    value: Any
    attempts: int


class Client:
    """One source's pooled client and its calls (every coroutine runs on the HTTP loop)."""

    def __init__(self, endpoint: Endpoint) -> None:
        require_http()
        mask_library_logs()
        self.endpoint = endpoint
        self._client: httpx.AsyncClient | None = None

    def _make(self) -> httpx.AsyncClient:
        import httpx

        e = self.endpoint
        verify: bool | ssl.SSLContext = e.verify
        if e.verify and e.ca_file:
            verify = ssl.create_default_context(cafile=e.ca_file)
        return httpx.AsyncClient(
            headers=dict(e.headers),
            verify=verify,
            follow_redirects=e.follow_redirects,
            timeout=None,  # the call's deadline covers everything (see call)
            limits=httpx.Limits(max_connections=e.pool_size, max_keepalive_connections=e.pool_size),
            trust_env=False,  # where a call goes and what it sends: the sources file alone
        )

    def _fail(self, message: str, unavailable: bool = False) -> HttpSourceError:
        e = self.endpoint
        text = scrub(f"{e.source_id}: {e.shown}: {message}", e.secrets)
        return (HttpUnavailableError if unavailable else HttpSourceError)(text)

    async def call(
        self,
        deadline: float,
        params: list[tuple[str, str]] | None = None,
        body: Any = None,
        url: str | None = None,
        method: str | None = None,
        expect_json: bool = True,
    ) -> Answer:
        """The parsed JSON answer of one call, retried as the module says, all of it
        before ``deadline`` (``loop.time()``); an :class:`HttpSourceError` otherwise."""
        import httpx

        if self._client is None:
            self._client = self._make()
        loop = asyncio.get_running_loop()
        e = self.endpoint
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers = {"content-type": "application/json"} if content is not None else None
        target, params = with_params(url or e.url, params)
        attempt = 0
        while True:
            attempt += 1
            stage = ["connecting and waiting for the headers"]
            progress = [0]
            try:
                async with asyncio.timeout_at(deadline):
                    status, response_headers, raw = await self._once(
                        method or e.method, target, params, content, headers, stage, progress
                    )
            except TimeoutError:
                where = stage[0] + (f", {progress[0]:,} bytes so far" if progress[0] else "")
                raise self._fail(
                    f"no complete answer within the deadline (timeout_s; attempt {attempt}; "
                    f"{where})"
                ) from None
            except TooLargeError as exc:
                raise self._fail(
                    f"answered {stage[1] if len(stage) > 1 else '?'}: the body is {exc}: "
                    "raise max_bytes or ask for fewer rows (limit)"
                ) from None
            except httpx.TransportError as exc:
                reason = str(exc) or type(exc).__name__
                unavailable = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                raise self._fail(
                    f"{'cannot reach the engine' if unavailable else 'the connection failed'}"
                    f" ({type(exc).__name__}: {reason[:SHOWN_CHARS]})",
                    unavailable,
                ) from None
            if status in RETRY_STATUSES and attempt <= e.retries:
                wait = retry_after_s(response_headers.get("retry-after"))
                wait = BACKOFF_S * 2 ** (attempt - 1) if wait is None else wait
                if loop.time() + wait >= deadline:
                    raise self._fail(
                        f"answered {status} (Retry-After {wait:g} s): the wait would end past "
                        f"the deadline (timeout_s), not retried"
                    )
                logger.info(
                    "http_source_retry",
                    source_id=e.source_id,
                    status=status,
                    wait_s=round(wait, 3),
                    attempt=attempt,
                )
                await asyncio.sleep(wait)
                continue
            return Answer(status, self._parse(status, response_headers, raw, expect_json), attempt)

    async def _once(
        self,
        method: str,
        url: str,
        params: list[tuple[str, str]] | None,
        content: bytes | None,
        headers: dict[str, str] | None,
        stage: list[Any],
        progress: list[int],
    ) -> tuple[int, httpx.Headers, bytes]:
        assert self._client is not None
        query: Any = params
        async with self._client.stream(
            method, url, params=query, content=content, headers=headers
        ) as response:
            stage[0] = f"reading the body of a {response.status_code}"
            stage.append(response.status_code)
            if 300 <= response.status_code < 400 and not self.endpoint.follow_redirects:
                location = mask_url(response.headers.get("location", "?"))
                raise self._fail(
                    f"answered {response.status_code}: a redirect to {location}, not "
                    "followed (set follow_redirects: true, or the URL it names)"
                )
            cap = self.endpoint.max_bytes
            raw = await read_capped(response, cap, progress)
            return response.status_code, response.headers, raw

    def _parse(self, status: int, headers: httpx.Headers, raw: bytes, expect_json: bool) -> Any:
        if not expect_json and 200 <= status < 300:
            return None
        try:
            value = json.loads(raw)
        except RecursionError:
            value, problem = None, "JSON nested too deeply to read"
        except ValueError as exc:
            value, problem = None, f"not JSON ({str(exc)[:80]})"
        else:
            problem = ""
        if not 200 <= status < 300:
            raise self._fail(f"answered {status}: {_error_detail(value, raw)}")
        if problem:
            kind = headers.get("content-type", "no content type")
            raise self._fail(
                f"answered {status} but the body is {problem}; content type {kind}: {_snippet(raw)}"
            )
        if too_deep(value, self.endpoint.max_depth):
            raise self._fail(
                f"answered {status} but the JSON nests deeper than max_depth="
                f"{self.endpoint.max_depth}"
            )
        return value

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def with_params(
    url: str, params: list[tuple[str, str]] | None
) -> tuple[str, list[tuple[str, str]] | None]:
    """``url`` without its query and the parameters to send: the URL's own first, then
    the template's (httpx would replace the URL's query with ``params``, dropping a key
    written in it)."""
    if not params:
        return url, params
    parts = urlsplit(url)
    if not parts.query:
        return url, params
    fixed = parse_qsl(parts.query, keep_blank_values=True)
    return urlunsplit(parts._replace(query="")), [*fixed, *params]


def _snippet(raw: bytes) -> str:
    text = raw[:SNIPPET_CHARS].decode("utf-8", "replace")
    return repr(" ".join(text.split()))


def _error_detail(value: Any, raw: bytes) -> str:
    """What an engine's error body says: Elasticsearch's ``error.type: reason``,
    Typesense's ``message``, a ``detail``; else the body's start."""
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            kind, reason = error.get("type"), error.get("reason")
            if kind or reason:
                return f"{kind or 'error'}: {str(reason or '')[:SHOWN_CHARS]}"
        for key in ("message", "detail", "error"):
            if isinstance(value.get(key), str):
                return str(value[key])[:SHOWN_CHARS]
    return f"body {_snippet(raw) if raw else '(empty)'}"


_loop: BackgroundLoop | None = None
_loop_lock = threading.Lock()


def http_loop() -> BackgroundLoop:
    """The process's HTTP loop, started on first use (every source's client lives there)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = BackgroundLoop("nautilus-http")
            atexit.register(_shutdown)
        return _loop


def _shutdown() -> None:
    global _loop
    with _loop_lock:
        current, _loop = _loop, None
    if current is not None:
        current.stop(timeout=2)
