"""A new, empty PostgreSQL database (no Optuna schema in it yet) on the server of a URL, dropped
afterwards: what a fresh machine gives. Used by tests/search/study/test_postgres.py and
tests/benchmarks/bench_scaling.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy


@contextmanager
def fresh_database(url: str, prefix: str) -> Iterator[str]:
    """The URL of a new database named `prefix_<random>` beside the one `url` names."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT",
                                     poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
