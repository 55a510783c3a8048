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
- **Bounds**: the body is read as it streams in and refused past ``max_bytes``, on the
  wire and inflated, each coding undone in bounded steps (``bounded.py``); JSON nested
  deeper than ``max_depth`` is refused.
- **Redirects** are not followed unless the source says so, and then at most
  :data:`MAX_REDIRECTS`, each checked here: a source that sends credentials (headers,
  ``auth``, the URL's own) never follows one to another origin.
- **Errors**: whatever fails — the request that cannot be built, the connection, the
  body — is an :class:`HttpSourceError` naming the source and the call, its secrets
  masked in every form an engine may quote them (``secrets.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import email.utils
import functools
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
from nautilus_ranking.sources.http.bounded import (
    ACCEPT_ENCODING,
    EncodingError,
    TooLargeError,
    read_capped,
    too_deep,
)
from nautilus_ranking.sources.http.quoted import (
    SHOWN_CHARS,
    SNIPPET_CHARS,
    error_detail,
    origin,
    snippet,
    text_of,
)
from nautilus_ranking.sources.http.secrets import Masker, mask_library_logs, mask_url
from nautilus_ranking.tracing.carry import outgoing_headers

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
#: Redirects followed at most (with ``follow_redirects: true``).
MAX_REDIRECTS = 5


class HttpSourceError(NautilusError, RuntimeError):
    """An HTTP source's call failed: the message names the source, the call (its URL
    masked), the status and what failed."""


class HttpTimeoutError(HttpSourceError, TimeoutError):
    """No complete answer within the source's deadline: typed ``timeout`` by the broker,
    as when the broker's own deadline fires first (one failure, one type)."""


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


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); None when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²" is a digit to str.isdigit
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

    @functools.cached_property
    def masker(self) -> Masker:
        return Masker(self.secrets)

    @property
    def credentialed(self) -> bool:
        """Whether a call carries credentials: headers (every value counts as one), or
        the URL's password or credential parameters."""
        return bool(self.secrets)

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
            headers={"Accept-Encoding": ACCEPT_ENCODING, **e.headers},
            verify=verify,
            follow_redirects=False,  # followed in _once, each checked
            timeout=None,  # the call's deadline covers everything (see call)
            limits=httpx.Limits(max_connections=e.pool_size, max_keepalive_connections=e.pool_size),
            trust_env=False,  # where a call goes and what it sends: the sources file alone
        )

    def _fail(self, message: str, unavailable: bool = False) -> HttpSourceError:
        e = self.endpoint
        text = e.masker(f"{e.source_id}: {e.shown}: {message}")
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
        headers = outgoing_headers(headers)  # the source's span as the engine's parent
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
            except HttpSourceError:
                raise
            except TimeoutError:
                where = stage[0] + (f", {progress[0]:,} bytes so far" if progress[0] else "")
                raise HttpTimeoutError(
                    e.masker(
                        f"{e.source_id}: {e.shown}: no complete answer within the deadline "
                        f"(timeout_s; attempt {attempt}; {where})"
                    )
                ) from None
            except TooLargeError as exc:
                raise self._fail(
                    f"answered {stage[1] if len(stage) > 1 else '?'}: the body is {exc}: "
                    "raise max_bytes or ask for fewer rows (limit)"
                ) from None
            except EncodingError as exc:
                raise self._fail(f"answered {stage[1] if len(stage) > 1 else '?'} {exc}") from None
            except httpx.TransportError as exc:
                reason = e.masker.cut(str(exc) or type(exc).__name__, SHOWN_CHARS)
                unavailable = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                raise self._fail(
                    f"{'cannot reach the engine' if unavailable else 'the connection failed'}"
                    f" ({type(exc).__name__}: {reason})",
                    unavailable,
                ) from None
            except Exception as exc:  # anything else is this source's failure, named
                reason = e.masker.cut(text_of(exc), SHOWN_CHARS)
                raise self._fail(f"the call failed ({type(exc).__name__}: {reason})") from None
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
        """One attempt: the request, its redirects (when followed, each checked) and the
        final answer's body, read within ``max_bytes``."""
        assert self._client is not None
        e = self.endpoint
        for _ in range(MAX_REDIRECTS + 1):
            try:
                query: Any = params
                request = self._client.build_request(
                    method, url, params=query, content=content, headers=headers
                )
            except Exception as exc:  # a URL too long, a query that cannot be encoded
                reason = e.masker.cut(text_of(exc), SHOWN_CHARS)
                raise self._fail(
                    f"the request cannot be sent ({type(exc).__name__}: {reason})"
                ) from None
            response = await self._client.send(request, stream=True)
            try:
                status = response.status_code
                stage[0] = f"reading the body of a {status}"
                stage[1:] = [status]
                location = response.headers.get("location")
                if not 300 <= status < 400 or location is None:
                    raw = await read_capped(response, e.max_bytes, progress)
                    return status, response.headers, raw
                target = request.url.join(location)
                if not e.follow_redirects:
                    raise self._fail(
                        f"answered {status}: a redirect to {mask_url(str(target))}, not "
                        "followed (set follow_redirects: true, or the URL it names)"
                    )
                if e.credentialed and origin(target) != origin(request.url):
                    raise self._fail(
                        f"answered {status}: a redirect to another origin ({origin(target)}), "
                        "refused: this source sends credentials (headers, auth or the URL's), "
                        "which must not reach another host (set url to where it redirects)"
                    )
            finally:
                await response.aclose()
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, content, headers = "GET", None, None  # as browsers and httpx do
            url, params = str(target), None
        raise self._fail(f"more than {MAX_REDIRECTS} redirects (the last to {mask_url(url)})")

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
        mask = self.endpoint.masker
        if not 200 <= status < 300:
            raise self._fail(f"answered {status}: {error_detail(value, raw, mask)}")
        if problem:
            kind = mask.cut(headers.get("content-type", "no content type"), SNIPPET_CHARS)
            raise self._fail(
                f"answered {status} but the body is {problem}; content type {kind}: "
                f"{snippet(raw, mask)}"
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
    if not params:  # None, not []: httpx would replace the URL's query with nothing
        return url, None
    parts = urlsplit(url)
    if not parts.query:
        return url, params
    fixed = parse_qsl(parts.query, keep_blank_values=True)
    return urlunsplit(parts._replace(query="")), [*fixed, *params]


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
