"""Connection strings: masked wherever they are shown (logs, errors, dumps, ``repr``).

A DSN is masked by reading it as libpq does (its URI and ``key=value`` parsers,
below), and then erring wide: an operator who pasted a password with an unencoded
``/`` or ``@`` into a URL, or quoted one with ``"…"`` or ``''…''`` in key=value
form, meant all of it as the password, whatever libpq makes of it. So the mask
covers the password as libpq reads it *and* whatever the operator may have meant:

- URL form: from the ``:`` after the user name to the **last** ``@`` (libpq stops at
  the first ``/`` or ``@``; ``u:S3cr3t/tail@host`` is a host ``u``, a port
  ``S3cr3t`` and a database ``tail@host`` to it); a ``password=`` query parameter up
  to the next ``&name=`` whose name is a libpq keyword;
- key=value form: the value as libpq reads it (``'…'`` with ``\\'`` and ``\\\\``, or
  a bare word in which ``\\`` escapes the next character), then on up to the next
  ``keyword=`` that starts an option (``password="a b" dbname=kb`` masks ``"a b"``).
  And every ``password=`` that starts a word, however libpq reads it, up to the next
  option: after a stray word (``sslmode password=S``, which libpq refuses at
  ``sslmode``) or an empty value (``dbname= password=S``, which libpq reads as a
  database named ``password=S``) the operator still meant a password.

A driver's error quotes what libpq parsed (``failed to resolve host "ss@db"``,
``invalid port "S3cr3t"``): for a DSN libpq reads differently from its mask, no
part of such a message can be trusted, so :func:`scrub` replaces it with one that
says how to write the password instead.
"""

from __future__ import annotations

import re

from pydantic import SecretStr

#: A connection attempt gives up after this long unless the DSN sets ``connect_timeout``.
DEFAULT_CONNECT_TIMEOUT_S = 10

#: libpq's connection keywords (PostgreSQL 18): where a masked value may end.
KEYWORDS = frozenset(
    """
host hostaddr port dbname user password passfile require_auth channel_binding
connect_timeout client_encoding options application_name fallback_application_name
keepalives keepalives_idle keepalives_interval keepalives_count tcp_user_timeout
replication gssencmode sslmode sslnegotiation requiressl sslcompression sslcert sslkey
sslkeylogfile sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer
ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
service target_session_attrs load_balance_hosts min_protocol_version
max_protocol_version scram_client_key scram_server_key oauth_issuer oauth_client_id
oauth_client_secret oauth_scope
""".split()
)
#: Keywords whose value is a secret.
SECRET_KEYWORDS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)
MASK = "***"

_URL_FORM = re.compile(r"\s*(?:postgres|postgresql)://", re.IGNORECASE)
_OTHER_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.\-]*://")
_SPACE = " \t\n\v\f\r"  # C isspace: what libpq splits key=value options at
_SPACE_RUN = re.compile(r"[ \t\n\v\f\r]+")
#: Matched only where a run of spaces starts (:func:`_next_option`): searched from every
#: position, it rescanned a run from each of its spaces (quadratic on a long run).
_OPTION_AFTER = re.compile(
    r"[ \t\n\v\f\r]++(" + "|".join(sorted(KEYWORDS, key=len, reverse=True)) + r")[ \t\n\v\f\r]*+="
)
#: A secret keyword and its ``=`` wherever a word starts (not after a letter, a digit or
#: ``_``): what an operator may have meant as a password, however libpq reads the rest.
_SECRET_OPTION = re.compile(
    r"(?<![A-Za-z0-9_])(?:"
    + "|".join(sorted(SECRET_KEYWORDS, key=len, reverse=True))
    + r")[ \t\n\v\f\r]*+=",
    re.IGNORECASE,
)
_NEXT_PARAMETER = re.compile(r"&(" + "|".join(sorted(KEYWORDS, key=len, reverse=True)) + r")=")
_SECRET_PARAMETER = re.compile(r"[?&](?:" + "|".join(SECRET_KEYWORDS) + r")=", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN with every password (and what may have been meant as one) as ``***``."""
    spans = _secret_spans(dsn)
    out, at = [], 0
    for start, end in spans:
        out += [dsn[at:start], MASK]
        at = end
    return "".join([*out, dsn[at:]])


def _secret_spans(dsn: str) -> list[tuple[int, int]]:
    if _URL_FORM.match(dsn) or _OTHER_URL.match(dsn):
        return _url_spans(dsn)
    return _merged(_keyword_spans(dsn) + _meant_spans(dsn))


def _url_spans(dsn: str) -> list[tuple[int, int]]:
    start = dsn.index("://") + 3
    spans = []
    at = dsn.rfind("@", start)
    if at >= 0:
        colon = dsn.find(":", start, at)
        if colon >= 0:
            spans.append((colon + 1, at))
    # from the start: a password parameter holding an '@' overlaps the span above
    for match in _SECRET_PARAMETER.finditer(dsn, start):
        value = match.end()
        following = _NEXT_PARAMETER.search(dsn, value)
        spans.append((value, following.start() if following else len(dsn)))
    return _merged(spans)


def _keyword_spans(dsn: str) -> list[tuple[int, int]]:
    """libpq's ``conninfo_parse``: each option's value span; a secret's then widened."""
    spans, i, n = [], 0, len(dsn)
    while i < n:
        while i < n and dsn[i] in _SPACE:
            i += 1
        if i >= n:
            break
        name_start = i
        while i < n and dsn[i] != "=" and dsn[i] not in _SPACE:
            i += 1
        name = dsn[name_start:i]
        while i < n and dsn[i] in _SPACE:
            i += 1
        if i >= n or dsn[i] != "=":  # libpq: 'missing "=" after …'; what follows is unread
            i = _next_option(dsn, i)
            continue
        i += 1
        while i < n and dsn[i] in _SPACE:
            i += 1
        value = i
        if i < n and dsn[i] == "'":
            i += 1
            while i < n and dsn[i] != "'":
                i += 2 if dsn[i] == "\\" else 1
            i = min(i + 1, n)
        else:
            while i < n and dsn[i] not in _SPACE:
                i += 2 if dsn[i] == "\\" else 1
            i = min(i, n)
        if name.lower() in SECRET_KEYWORDS:
            end = _next_option(dsn, i)
            spans.append((value, end))
            i = end
    return _merged(spans)


def _meant_spans(dsn: str) -> list[tuple[int, int]]:
    """Every ``password=`` (any secret keyword, any case) that starts a word, whatever
    libpq makes of it, masked up to the next option: after a word without ``=``
    (``sslmode password=S``: libpq stops reading at the stray word) or an empty value
    (``dbname= password=S``: libpq reads a database ``password=S``), the operator still
    meant a password. Linear: a search resumes where the last mask ended."""
    spans, at = [], 0
    while (found := _SECRET_OPTION.search(dsn, at)) is not None:
        end = _next_option(dsn, found.end())
        spans.append((found.end(), end))
        at = max(end, found.end())
    return spans


def _next_option(dsn: str, at: int) -> int:
    """Where the next ``keyword=`` that starts an option begins (its leading spaces), at
    or after ``at``; ``len(dsn)`` when none does. Linear: each run of spaces is read once
    to find it and once to try it."""
    for run in _SPACE_RUN.finditer(dsn, at):
        if _OPTION_AFTER.match(dsn, run.start()):
            return run.start()
    return len(dsn)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def misread(dsn: str) -> bool:
    """Whether libpq reads the DSN otherwise than its mask says (a password with an
    unencoded ``/``, ``@``, ``&`` or ``#``, or quoted with ``"``): its errors may then
    quote parts of the password as a host, a port, a database or an option name."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return True
    masked = mask_dsn(dsn)
    try:
        read = conninfo_to_dict(dsn)
    except Exception:
        read = None
    try:
        meant = conninfo_to_dict(masked)
    except Exception:
        return True
    if read is None:
        return True
    for name in SECRET_KEYWORDS:  # an empty password masked is no password at all
        meant.pop(name, None)
        read.pop(name, None)
    return read != meant


#: What replaces a driver's message about a DSN that libpq misreads.
MISREAD = (
    "the DSN's password is not written as libpq reads it (the driver's message, "
    "which may quote it, is withheld): percent-encode it in a URL ('/' %2F, '@' %40, "
    "'#' %23, '&' %26), or quote it as '…' in key=value form"
)


def scrub(text: str, dsn: str) -> str:
    """``text`` (a driver's error) with the DSN's password masked wherever it appears;
    for a DSN libpq misreads (:func:`misread`), :data:`MISREAD` instead."""
    if misread(dsn):
        return MISREAD
    secrets = [dsn, *(dsn[start:end] for start, end in _secret_spans(dsn))]
    try:
        from psycopg.conninfo import conninfo_to_dict

        values = conninfo_to_dict(dsn)
        secrets += [str(values[name]) for name in SECRET_KEYWORDS if values.get(name)]
    except Exception:  # an unparsable DSN is misread: handled above
        pass
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, mask_dsn(dsn) if secret == dsn else MASK)
    return text


class Dsn(SecretStr):
    """A connection string that shows only its masked form in ``repr``, ``str`` and dumps."""

    def _display(self) -> str:
        return mask_dsn(self.get_secret_value())
