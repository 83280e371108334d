"""Opening a PostgreSQL store: the URL, the connection, and every check that must pass before anything is written.

Each failure a user can meet (no server there, the role or password refused, no such database, no pgvector, a
schema written by another pathweaver) becomes a ``StoreError`` that names the fix; nothing is created until every
check has passed.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pathweaver.store.db import StoreError

SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 5
VECTOR_EXTENSION = "vector"


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://...`` or ``postgres://...``)."""
    return urlsplit(str(text)).scheme in SCHEMES and "://" in str(text)


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***``, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _driver():  # noqa: ANN202 - psycopg is an optional extra
    try:
        import psycopg
    except ImportError as exc:
        raise StoreError("a postgresql:// store needs psycopg: pip install 'pathweaver[postgres]'") from exc
    return psycopg


def connect(url: str):  # noqa: ANN201 - a psycopg.Connection
    """An autocommit connection to ``url``; a ``StoreError`` naming the cause when the server refuses."""
    psycopg = _driver()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        raise StoreError(_explain(url, str(exc))) from exc
    except psycopg.ProgrammingError as exc:  # a malformed URL or option
        raise StoreError(f"cannot use store URL {redacted(url)}: {exc}") from exc


def _explain(url: str, text: str) -> str:
    """The connection error ``text`` as a message naming the fix."""
    where = redacted(url)
    low = text.lower()
    if "password authentication failed" in low or ("role" in low and "does not exist" in low) \
            or "no password supplied" in low or "authentication failed" in low:
        return (f"PostgreSQL refused the credentials of {where}: {text.strip()}. Check the user and password in the "
                "URL (or PGPASSWORD / ~/.pgpass)")
    if "database" in low and "does not exist" in low:
        return f"{where}: {text.strip()}. Create it first (CREATE DATABASE ...) or name an existing one"
    return (f"cannot reach PostgreSQL at {where}: {text.strip()}. Is the server running, and are the host, port "
            "and socket directory right?")


def check_vector(conn) -> None:  # noqa: ANN001
    """Make sure pgvector is installed in the database: create it when this role may, else say who must."""
    psycopg = _driver()
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (VECTOR_EXTENSION,)).fetchone():
        return
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (VECTOR_EXTENSION,)).fetchone():
        raise StoreError("this PostgreSQL server has no pgvector extension; install pgvector on the server "
                         "(https://github.com/pgvector/pgvector; managed services list it as 'vector') and run "
                         "CREATE EXTENSION vector in the database")
    try:
        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {VECTOR_EXTENSION}")
    except psycopg.errors.UniqueViolation:
        return  # another process created it between our look and ours (IF NOT EXISTS does not close that race)
    except psycopg.Error as exc:
        raise StoreError(f"the database lacks the pgvector extension and this role may not create it ({exc}). "
                         "Ask its owner or a superuser to run: CREATE EXTENSION vector;") from exc
