"""The store's SQL on PostgreSQL: a connection that takes the SQLite statements of ``store/`` and runs their
PostgreSQL twins, so every store function works unchanged on either backend (``conn`` stays opaque above store/).

Statements are rewritten once each (cached): ``?`` and ``?N`` placeholders, ``INSERT OR IGNORE`` / ``OR REPLACE``
→ ``ON CONFLICT``, scalar ``min``/``max`` → ``LEAST``/``GREATEST``, ``group_concat`` → ``string_agg``, the column
``end`` quoted, ``sqlite_master`` → ``information_schema``, ``lastrowid`` → ``RETURNING id``. The virtual tables
have no twin in SQL: rows of ``chunks_fts`` / ``entities_fts`` become BM25 postings (``chunk_terms``,
``entity_terms``, FTS5's own terms from ``store.fts_tokens``) and ``chunk_vec`` rows pgvector rows, written here.
SQL already in PostgreSQL's dialect (``%s`` placeholders and no ``?``: ``store.pg``'s own modules) runs as is.
Errors come out as the ``sqlean`` error classes the store already handles (locked, integrity).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import sqlean

from pathweaver.store.fts_tokens import NAME_TOKENIZER, Fts5Tokenizer
from pathweaver.store.pg.schema import SCHEMA

WRITE_LOCK = 0x70617468  # the advisory lock key every writer of a store takes ("path")
# Tables with an identity ``id`` whose inserts report ``lastrowid`` (``RETURNING id``).
ID_TABLES = frozenset({"documents", "chunks", "entities", "relations"})
# The conflict target of ``INSERT OR REPLACE`` per table (their primary keys).
REPLACE_KEYS = {"meta": ("key",), "entity_norms": ("id",), "relation_norms": ("id",), "embed_cache": ("text_hash",),
                "ner_cache": ("text_hash",), "gram_df": ("gram",), "folders": ("machine", "path")}

_NUMBERED = re.compile(r"\?(\d+)")
_SCALAR = re.compile(r"\b(min|max)\(([^(),]+),([^(),]+)\)", re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"group_concat\(([^()]*(?:\([^()]*\))?[^()]*?),\s*(char\(31\)|'[^']*')\)", re.IGNORECASE)
_REPLACE = re.compile(r"INSERT OR REPLACE INTO (\w+)\s*\(([^)]*)\)", re.IGNORECASE)
_MASTER = re.compile(r"SELECT (.+?) FROM sqlite_master WHERE name = '(\w+)'", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, bool]:
    """(the PostgreSQL twin of SQLite statement ``sql``, whether ``?N`` numbered placeholders became names)."""
    out = sql.replace("%", "%%")
    numbered = bool(_NUMBERED.search(out))
    out = _NUMBERED.sub(lambda m: f"%(p{m.group(1)})s", out) if numbered else out.replace("?", "%s")
    if re.search(r"INSERT OR IGNORE INTO", out, re.IGNORECASE):
        out = re.sub(r"INSERT OR IGNORE INTO", "INSERT INTO", out, flags=re.IGNORECASE) + " ON CONFLICT DO NOTHING"
    m = _REPLACE.search(out)
    if m:
        table, cols = m.group(1), [c.strip() for c in m.group(2).split(",")]
        keys = REPLACE_KEYS[table]
        rest = [c for c in cols if c not in keys]
        action = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in rest) if rest else "DO NOTHING"
        out = _REPLACE.sub(f"INSERT INTO {table}({m.group(2)})", out) + f" ON CONFLICT ({', '.join(keys)}) {action}"
    out = _qualified_upsert(out)
    out = _MASTER.sub(lambda m: f"SELECT {m.group(1)} FROM information_schema.tables WHERE table_schema = "
                                f"'{SCHEMA}' AND table_name = '{m.group(2)}'", out)
    out = _SCALAR.sub(lambda m: f"{'LEAST' if m.group(1).lower() == 'min' else 'GREATEST'}({m.group(2)},{m.group(3)})",
                      out)
    out = _GROUP_CONCAT.sub(lambda m: f"string_agg(({m.group(1)})::text, {m.group(2)})", out)
    out = re.sub(r"\bchar\(31\)", "chr(31)", out)
    out = re.sub(r"(\w)\.end\b", r'\1."end"', out)
    out = re.sub(r"\bstart, end\b", 'start, "end"', out)
    out = re.sub(r"AS INTEGER\)", "AS BIGINT)", out)
    return out, numbered


def _qualified_upsert(sql: str) -> str:
    """``ON CONFLICT ... DO UPDATE SET c = f(c, excluded.c)`` with the bare ``c`` named by its table: PostgreSQL
    finds a bare column there ambiguous (the row or ``excluded``), SQLite takes the row's."""
    m = re.match(r"\s*INSERT INTO (\w+)", sql, re.IGNORECASE)
    at = sql.upper().find("DO UPDATE SET")
    if not m or at < 0:
        return sql
    head, tail = sql[:at + len("DO UPDATE SET")], sql[at + len("DO UPDATE SET"):]
    for col in set(re.findall(r"(?:^|,)\s*(\w+)\s*=", tail)):
        tail = re.sub(rf"(?<![.\w\"]){col}\b(?!\s*=[^=])(?![\w(])", f"{m.group(1)}.{col}", tail)
    return head + tail


def _params(params: Any, numbered: bool) -> Any:
    if params is None:
        return ()
    if numbered:
        return {f"p{i}": v for i, v in enumerate(params, start=1)}
    return tuple(params) if not isinstance(params, dict) else params


def _native(sql: str, params: Any) -> bool:
    """SQL already written for PostgreSQL (``store.pg``): ``%s`` placeholders, no ``?``."""
    return "?" not in sql and ("%s" in sql or "%(" in sql)


def vector_text(blob: bytes | np.ndarray) -> str:
    """pgvector's text form of a float32 vector (a BLOB as the SQLite store binds it, or an array)."""
    vec = np.frombuffer(blob, dtype=np.float32) if isinstance(blob, bytes | bytearray | memoryview) else blob
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vec, dtype=np.float32)) + "]"


class PgCursor:
    """The part of a DB-API cursor the store uses, over a psycopg cursor (or rows made here)."""

    def __init__(self, cur: Any = None, lastrowid: int | None = None, rows: list[tuple] | None = None) -> None:
        self._cur = cur
        self._rows = rows
        self.lastrowid = lastrowid

    def fetchone(self) -> Any:
        if self._rows is not None:
            return self._rows.pop(0) if self._rows else None
        return self._cur.fetchone() if self._cur is not None and self._cur.description else None

    def fetchall(self) -> list[Any]:
        if self._rows is not None:
            rows, self._rows = self._rows, []
            return rows
        return self._cur.fetchall() if self._cur is not None and self._cur.description else []

    def fetchmany(self, size: int = 1) -> list[Any]:
        if self._rows is not None:
            rows, self._rows = self._rows[:size], self._rows[size:]
            return rows
        return self._cur.fetchmany(size) if self._cur is not None and self._cur.description else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    @property
    def description(self) -> Any:
        return None if self._cur is None else self._cur.description

    @property
    def rowcount(self) -> int:
        return -1 if self._cur is None else self._cur.rowcount

    def close(self) -> None:
        if self._cur is not None:
            self._cur.close()


def _error(exc: Exception) -> Exception:
    """A psycopg error as the ``sqlean`` class the store's callers catch."""
    import psycopg

    if isinstance(exc, psycopg.errors.IntegrityError):
        return sqlean.IntegrityError(str(exc))
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.DeadlockDetected):
        return sqlean.OperationalError(f"database is locked: {exc}")
    return sqlean.OperationalError(str(exc))


class PgConnection:
    """A psycopg connection (autocommit) that speaks the SQLite store's SQL (module docstring)."""

    def __init__(self, raw: Any, url: str) -> None:
        self.raw = raw
        self.url = url
        self._busy_wait = True  # PRAGMA busy_timeout=0: BEGIN IMMEDIATE gives up at once when another writer holds
        self._chunk_tokens: Fts5Tokenizer | None = None
        self._name_tokens: Fts5Tokenizer | None = None

    # -- what store/ calls -----------------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def cursor(self) -> Any:
        return self.raw.cursor()

    def transaction(self) -> Any:
        return self.raw.transaction()

    def close(self) -> None:
        self.raw.close()

    def commit(self) -> None:
        if self.in_transaction:
            self._run("COMMIT", ())

    def execute(self, sql: str, params: Any = None) -> PgCursor:
        special = self._special(sql, [params] if params is not None else [()])
        if special is not None:
            return special
        if _native(sql, params):
            return PgCursor(self._run(sql, params))
        text, numbered = translate(sql)
        returning = self._returning(text)
        cur = self._run(text + (" RETURNING id" if returning else ""), _params(params, numbered))
        if returning:
            row = cur.fetchone()
            return PgCursor(None, lastrowid=int(row[0]) if row else None)
        return PgCursor(cur)

    def executemany(self, sql: str, seq: Iterable[Any]) -> PgCursor:
        rows = list(seq)
        if not rows:
            return PgCursor(None)
        special = self._special(sql, rows)
        if special is not None:
            return special
        text, numbered = (sql, False) if _native(sql, rows[0]) else translate(sql)
        try:
            with self.raw.cursor() as cur:
                cur.executemany(text, [_params(r, numbered) for r in rows])
        except Exception as exc:
            if _is_pg_error(exc):
                raise _error(exc) from exc
            raise
        return PgCursor(None)

    # -- internals -------------------------------------------------------------------------------------------
    def _run(self, sql: str, params: Any) -> Any:
        try:
            return self.raw.execute(sql, params)
        except Exception as exc:
            if _is_pg_error(exc):
                raise _error(exc) from exc
            raise

    @staticmethod
    def _returning(text: str) -> bool:
        m = re.match(r"\s*INSERT INTO (\w+)", text, re.IGNORECASE)
        return bool(m) and m.group(1) in ID_TABLES and "RETURNING" not in text.upper() \
            and "ON CONFLICT DO NOTHING" not in text and not re.search(r"\(\s*id\s*,", text)

    def _special(self, sql: str, rows: Sequence[Any]) -> PgCursor | None:
        """The statements with no SQL twin (transactions, pragmas, the virtual tables); None for the others."""
        head = sql.strip().upper()
        if head.startswith("PRAGMA"):
            if "BUSY_TIMEOUT" in head:
                self._busy_wait = not head.endswith("=0")
            return PgCursor(None, rows=[("ok",)] if "INTEGRITY_CHECK" in head else [])
        if head == "BEGIN IMMEDIATE":
            self._run("BEGIN", ())
            if self._busy_wait:
                self._run("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            elif not self._run("SELECT pg_try_advisory_xact_lock(%s)", (WRITE_LOCK,)).fetchone()[0]:
                self._run("ROLLBACK", ())
                raise sqlean.OperationalError("database is locked (another pathweaver process is writing)")
            return PgCursor(None)
        if head == "BEGIN":  # a read transaction: one consistent view, as SQLite's
            self._run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", ())
            return PgCursor(None)
        if head == "VACUUM":  # SQLite's file compaction; autovacuum does this on PostgreSQL
            return PgCursor(None)
        if "CHUNKS_FTS" in head or "ENTITIES_FTS" in head or "CHUNK_VEC" in head:
            return self._virtual(sql, head, rows)
        return None

    def _virtual(self, sql: str, head: str, rows: Sequence[Any]) -> PgCursor | None:
        if head.startswith("DELETE FROM CHUNKS_FTS WHERE ROWID"):
            ids = [int(r[0]) for r in rows]
            self._run("DELETE FROM chunk_terms WHERE chunk_id = ANY(%s)", (ids,))
            self._run("DELETE FROM chunk_lengths WHERE chunk_id = ANY(%s)", (ids,))
        elif head.startswith("INSERT INTO CHUNKS_FTS(ROWID, TEXT, TITLE)"):
            from pathweaver.store.pg.search import write_postings

            write_postings(self.raw, self.chunk_tokens(), [(int(r[0]), r[1], r[2]) for r in rows])
        elif head.startswith("DELETE FROM CHUNK_VEC WHERE ROWID"):
            self._run("DELETE FROM chunk_vec WHERE id = ANY(%s)", ([int(r[0]) for r in rows],))
        elif head.startswith("INSERT INTO CHUNK_VEC(ROWID, EMBEDDING)"):
            with self.raw.cursor() as cur, cur.copy("COPY chunk_vec(id, embedding) FROM STDIN") as copy:
                for cid, blob in rows:
                    copy.write_row((int(cid), vector_text(blob)))
        elif head.startswith("DELETE FROM ENTITIES_FTS WHERE ROWID"):
            self._run("DELETE FROM entity_terms WHERE entity_id = ANY(%s)", ([int(r[0]) for r in rows],))
        elif "FROM SQLITE_MASTER" in head and "CHUNK_VEC" in head:
            row = self._run("SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND "
                            "table_name = 'chunk_vec'", (SCHEMA,)).fetchone()
            return PgCursor(None, rows=[row] if row else [])
        else:
            return None  # DDL and reads of the PostgreSQL tables of those names
        return PgCursor(None)

    def insert_entity_names(self, first: int, names: Sequence[str]) -> None:
        """``entities_fts`` rows ``(first + k, names[k])``: unicode61 postings of each name."""
        counts = self.name_tokens().postings([(n, "") for n in names])
        with self.raw.cursor() as cur, cur.copy("COPY entity_terms(term, entity_id, tf) FROM STDIN") as copy:
            for k, terms in enumerate(counts):
                for term, tf in terms.items():
                    copy.write_row((term, first + k, tf))

    def reserve_ids(self, table: str, n: int) -> range:
        """``n`` ids above every id ``table`` has and its sequence gave, for rows inserted with explicit ids (inside
        a write transaction: writers hold the store's lock, so no other process takes them meanwhile)."""
        seq = self._run("SELECT pg_get_serial_sequence(%s, 'id')", (f"{SCHEMA}.{table}",)).fetchone()[0]
        top = self._run(f"SELECT greatest(coalesce(max(id), 0), (SELECT CASE WHEN is_called THEN last_value "
                        f"ELSE 0 END FROM {seq})) FROM {table}", ()).fetchone()[0]
        start = int(top) + 1
        if n > 0:
            self._run("SELECT setval(%s, %s)", (seq, start + n - 1))
        return range(start, start + n)

    def chunk_tokens(self) -> Fts5Tokenizer:
        if self._chunk_tokens is None:
            self._chunk_tokens = Fts5Tokenizer()
        return self._chunk_tokens

    def name_tokens(self) -> Fts5Tokenizer:
        if self._name_tokens is None:
            self._name_tokens = Fts5Tokenizer(NAME_TOKENIZER)
        return self._name_tokens


def _is_pg_error(exc: Exception) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)


def is_pg(conn: Any) -> bool:
    """Whether ``conn`` is a PostgreSQL store's connection."""
    return isinstance(conn, PgConnection)
