"""Passwords never leave the process: a storage URL as messages, descriptions and stored
records show it (`redact`), and any text cut of the passwords a URL carries (`redact_text`):
the one in the authority (`user:password@host`) and query parameters that carry one
(`?password=...`, as libpq and SQLAlchemy accept)."""

from __future__ import annotations

from urllib.parse import unquote_plus, urlsplit

SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "sslpassword", "token", "secret")


def redact(url: str) -> str:
    """The URL without its passwords: `user:***@host`, `?password=***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    credentials, at, host = netloc.rpartition("@")
    if ":" in credentials:
        netloc = f"{credentials.split(':', 1)[0]}:***{at}{host}"
    query = "&".join(f"{pair.partition('=')[0]}=***" if _secret_key(pair) else pair
                     for pair in parts.query.split("&")) if parts.query else ""
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def _secret_key(pair: str) -> bool:
    return unquote_plus(pair.partition("=")[0]).lower() in SECRET_QUERY_KEYS


def secrets_of(url: str) -> list[str]:
    """The password strings `url` carries, as written and decoded (to cut them from any text
    that quotes them)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    credentials = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    found = [credentials.split(":", 1)[1]] if ":" in credentials else []
    found += [pair.partition("=")[2] for pair in parts.query.split("&") if _secret_key(pair)]
    found += [unquote_plus(secret) for secret in found]
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def redact_text(text: str, url: str | None) -> str:
    """`text` with every password of `url` replaced by ***."""
    for secret in secrets_of(url or ""):
        text = text.replace(secret, "***")
    return text
