"""Connection strings: masked wherever they are shown (logs, errors, dumps, ``repr``)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

#: A connection attempt gives up after this long unless the DSN sets ``connect_timeout``.
DEFAULT_CONNECT_TIMEOUT_S = 10

# libpq's keyword values: '…' with \' and \\ escapes, or a bare word in which a
# backslash escapes the next character (``password=Hunter\ TWO`` is "Hunter TWO").
# An unterminated quote or a trailing backslash masks to the end, never less.
_URL_FORM = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.\-]*://")
_KEYWORD_PASSWORD = re.compile(
    r"(password\s*=\s*)('(?:\\[\s\S]?|[^'\\])*'?|(?:\\[\s\S]?|[^\s\\])+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ``***`` (URL or ``key=value`` form)."""
    if not _URL_FORM.match(dsn):  # a URL starts with its scheme; "://" may be in a password
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    try:
        parts = urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = urlencode([(k, "***" if k.lower() == "password" else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)],
                          safe="/:*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "(unparsable DSN, masked)"


def scrub(text: str, dsn: str) -> str:
    """``text`` with the DSN's password (if it appears, e.g. in a driver's error) masked."""
    secrets = [dsn]
    try:
        from psycopg.conninfo import conninfo_to_dict
        password = conninfo_to_dict(dsn).get("password")
        if password:
            secrets.append(str(password))
    except Exception:  # an unparsable DSN: mask the whole string, that is all we can do
        pass
    for secret in secrets:
        if secret:
            text = text.replace(secret, mask_dsn(dsn) if secret == dsn else "***")
    return text


class Dsn(SecretStr):
    """A connection string that shows only its masked form in ``repr``, ``str`` and dumps."""

    def _display(self) -> str:
        return mask_dsn(self.get_secret_value())
