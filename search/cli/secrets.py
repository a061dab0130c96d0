"""Commands that take `--storage` never quote its passwords (issue 29): `redacting` wraps them.
Light on purpose: `show` imports it and must start fast."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from search.errors import SearchError
from search.study.errors import StorageError
from search.study.secrets import redact, redact_text


def redacting(command: Callable[[argparse.Namespace], int]
              ) -> Callable[[argparse.Namespace], int]:
    """`command` whose errors never quote the passwords of its `--storage` URL: an error whose
    text holds one is raised again with them replaced by *** (a foreign error as one
    StorageError line, never a traceback that could carry it)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except Exception as exc:
            url = getattr(args, "storage", None)
            text = str(exc)
            if not url or redact_text(text, url) == text:
                raise
            if isinstance(exc, SearchError):
                raise type(exc)(redact_text(text, url)) from None
            line = (text.strip().splitlines() or [""])[0]
            raise StorageError(f"`--storage` {redact(url)!r}: {type(exc).__name__}: "
                               f"{redact_text(line, url)}") from None

    return run
