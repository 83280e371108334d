"""Schema and migrations of the one-file store.

Each migration is a list of SQL statements applied in one transaction; ``meta.schema_version`` records how many
have run. Vector tables (sqlite-vec ``vec0``) need the embedding dimension, so they are created by
``create_vector_tables`` once the model is known.
"""

from __future__ import annotations

SCHEMA_V1: list[str] = [
    """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    # status: 'indexed' | 'skipped'. A skipped file keeps its reason and has no chunks. headings (JSON
    # [[offset, text]]) and links (JSON [target]) keep the structure the parser found, so refresh needs no re-parse.
    """CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL DEFAULT '',
        content_hash TEXT NOT NULL DEFAULT '',
        mtime REAL NOT NULL DEFAULT 0,
        size INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'indexed' CHECK (status IN ('indexed', 'skipped')),
        reason TEXT NOT NULL DEFAULT '',
        indexed_at REAL NOT NULL DEFAULT 0,
        headings TEXT NOT NULL DEFAULT '[]',
        links TEXT NOT NULL DEFAULT '[]'
    )""",
    "CREATE INDEX documents_hash ON documents(content_hash)",
    # start/end: character span of the chunk in the parsed document text. grams: JSON {gram: count} of all
    # candidate n-grams (the input of ER, AGRAG Eq. 2), kept so corpus statistics can be recomputed without parsing;
    # n_words is |t| of Eq. 2.
    """CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        ord INTEGER NOT NULL,
        start INTEGER NOT NULL,
        end INTEGER NOT NULL,
        n_tokens INTEGER NOT NULL,
        text TEXT NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        grams TEXT NOT NULL DEFAULT '{}',
        n_words INTEGER NOT NULL DEFAULT 0,
        UNIQUE (doc_id, ord)
    )""",
    "CREATE INDEX chunks_doc ON chunks(doc_id)",
    """CREATE VIRTUAL TABLE chunks_fts USING fts5(text, title, content='', contentless_delete=1,
        tokenize='porter unicode61')""",
    # Document frequency of every candidate gram over chunks (|{t_j : v in t_j}| in AGRAG Eq. 2).
    """CREATE TABLE gram_df (
        gram TEXT PRIMARY KEY,
        df INTEGER NOT NULL
    ) WITHOUT ROWID""",
    # kind: 'ngram' (statistical), 'title', 'heading', 'link' (structure people wrote, DESIGN principle 7).
    # AUTOINCREMENT: ids are never reused, so "id > synonym watermark" reliably means "not yet paired" (Eq. 5).
    """CREATE TABLE entities (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL DEFAULT 'ngram'
    )""",
    "CREATE VIRTUAL TABLE entities_fts USING fts5(name, content='', contentless_delete=1, tokenize='unicode61')",
    # Contains edges passage -> entity, with the mention count (count(v,t) of Eq. 2) and ER score.
    """CREATE TABLE mentions (
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        count INTEGER NOT NULL,
        score REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (entity_id, chunk_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX mentions_chunk ON mentions(chunk_id)",
    # kind: 'cooccur' (same sentence), 'link' (explicit link between notes).
    """CREATE TABLE relations (
        id INTEGER PRIMARY KEY,
        src_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        dst_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'cooccur',
        description TEXT NOT NULL DEFAULT '',
        UNIQUE (src_id, dst_id, label)
    )""",
    "CREATE INDEX relations_dst ON relations(dst_id)",
    "CREATE VIRTUAL TABLE relations_fts USING fts5(text, content='', contentless_delete=1, tokenize='porter unicode61')",
    # Provenance: which chunk (and character span of the sentence inside the document) supports a relation.
    """CREATE TABLE relation_sources (
        relation_id INTEGER NOT NULL REFERENCES relations(id) ON DELETE CASCADE,
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        start INTEGER NOT NULL DEFAULT 0,
        end INTEGER NOT NULL DEFAULT 0,
        sentence TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (relation_id, chunk_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX relation_sources_chunk ON relation_sources(chunk_id)",
    # Synonym edges (AGRAG Eq. 5), a < b, supported by the two entities existing.
    """CREATE TABLE synonyms (
        a_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        b_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        cos REAL NOT NULL,
        PRIMARY KEY (a_id, b_id),
        CHECK (a_id < b_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX synonyms_b ON synonyms(b_id)",
    # Embedding cache by text, so renames, refreshes and re-created entities cost no re-embedding.
    """CREATE TABLE embed_cache (
        text_hash TEXT PRIMARY KEY,
        vector BLOB NOT NULL
    ) WITHOUT ROWID""",
]

# Folders and citations in the file (issue 26).
SCHEMA_FOLDERS_AND_FILE_SPANS: list[str] = [
    # The folders servers and the CLI index: 'watched', 'indexed' (not watched) or 'removed' (a folder inside an
    # indexed one that remove_folder took out: its files stay out, across restarts and for every process).
    """CREATE TABLE folders (
        path TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('watched', 'indexed', 'removed')),
        changed_at REAL NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    # Where a chunk is in the file as stored on disk: file_start/file_end are character offsets into the file's
    # bytes decoded (line endings and a BOM kept), NULL where no such span exists (PDF, DOCX, chunks indexed before
    # this migration); locator names the page or paragraph ("page 3", "paragraphs 4-7") for PDF and DOCX.
    "ALTER TABLE chunks ADD COLUMN file_start INTEGER",
    "ALTER TABLE chunks ADD COLUMN file_end INTEGER",
    "ALTER TABLE chunks ADD COLUMN locator TEXT NOT NULL DEFAULT ''",
]

# Names people wrote (issue 23): each document's title and aliases, and where any of them occurs.
SCHEMA_NAMES: list[str] = [
    # A document's names (``extract.names.document_names``): entity name and kind ('title' | 'alias'). The entity
    # of each name is tied to the document's chunks, and lives as long as some document names it. Kept here (not
    # re-parsed) so refresh can re-link every chunk.
    """CREATE TABLE doc_names (
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        PRIMARY KEY (doc_id, name)
    ) WITHOUT ROWID""",
    "CREATE INDEX doc_names_name ON doc_names(name)",
    # Mention edges chunk -> name entity found by the name automaton (``extract.names.NameLinker``), with the
    # number of occurrences; apart from ``mentions`` so the statistical layer and this one are derived separately.
    """CREATE TABLE name_mentions (
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        count INTEGER NOT NULL,
        PRIMARY KEY (entity_id, chunk_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX name_mentions_chunk ON name_mentions(chunk_id)",
]

# Named entities (issue 23): spaCy's entity spans of a chunk text, keyed by ``text_hash(text, "ner:<model>")``;
# like ``embed_cache`` a pure function of the text, not graph state, so refreshes and re-indexes run no model.
SCHEMA_NER: list[str] = [
    """CREATE TABLE ner_cache (
        text_hash TEXT PRIMARY KEY,
        spans TEXT NOT NULL
    ) WITHOUT ROWID""",
]

# Entity and relation vectors are made from ``embed_cache`` when a snapshot needs them (``store.graphvecs``): the
# vec0 tables that held a second copy of each (most of a store's bytes) go. ``Database`` then VACUUMs once.
DROPPED_VECTOR_TABLES = ("entity_vec", "relation_vec")
SCHEMA_GRAPH_VECTORS_COMPOSED: list[str] = [f"DROP TABLE IF EXISTS {name}" for name in DROPPED_VECTOR_TABLES]
# A relation source's sentence is its span of the chunk's text (``SOURCE_SENTENCE`` below), not a copy of it.
SCHEMA_SOURCE_SPANS_ONLY: list[str] = ["ALTER TABLE relation_sources DROP COLUMN sentence"]

# Names from links and headings (issue 23): the display text of ``[[Target|display]]`` (and ``[display](target.md)``)
# names the documents that have Target as a title or alias; a heading names its own document when no other
# document has the same heading ("References", "Early life" in every article name nothing). ``name_rows`` is the
# one definition of "the names a document has" that vocabulary, ties and garbage collection all read, so each
# global rule is applied at read time and every stored row stays a fact of one document.
NAME_ROWS_VIEW = """CREATE VIEW name_rows(doc_id, name, kind) AS
        SELECT doc_id, name, kind FROM doc_names WHERE kind != 'heading'
        UNION ALL
        SELECT doc_id, name, kind FROM doc_names WHERE kind = 'heading' AND name IN (
            SELECT name FROM doc_names WHERE kind = 'heading' GROUP BY name HAVING count(*) = 1)
        UNION ALL
        SELECT DISTINCT n.doc_id, l.name, 'link' FROM link_names l
            JOIN doc_names n ON n.name = l.target AND n.kind IN ('title', 'alias')"""
SCHEMA_LINK_NAMES: list[str] = [
    """CREATE TABLE link_names (
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        target TEXT NOT NULL,
        name TEXT NOT NULL,
        PRIMARY KEY (doc_id, target, name)
    ) WITHOUT ROWID""",
    "CREATE INDEX link_names_target ON link_names(target)",
    NAME_ROWS_VIEW,
]

# The norms of composed entity and relation vectors' sums (``store.composed``): with them a query scores every
# entity and relation from its words' scores without making their tables. Derived data: the first reader that
# lacks some computes and stores them, for the ``meta.vector_settings`` it records as ``meta.norm_settings``.
SCHEMA_VECTOR_NORMS: list[str] = [
    "CREATE TABLE IF NOT EXISTS entity_norms (id INTEGER PRIMARY KEY, norm REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS relation_norms (id INTEGER PRIMARY KEY, norm REAL NOT NULL)",
]

def span_sentence(start: str, end: str) -> str:
    """SQL cutting the sentence at offsets ``start``..``end`` (SQL expressions, in the document's parsed text) from
    the text of the chunk row ``c``."""
    return f"substr(c.text, {start} - c.start + 1, {end} - {start})"


# A relation source's supporting sentence: its span (in the document's parsed text) cut from the chunk's text, for
# a ``relation_sources`` row ``s`` and its chunk ``c``.
SOURCE_SENTENCE = span_sentence("s.start", "s.end")
# The sentence of the lowest-chunk-id source of the relation row ``r`` (NULL while it has none).
FIRST_SOURCE_SENTENCE = (f"(SELECT {SOURCE_SENTENCE} FROM relation_sources s JOIN chunks c ON c.id = s.chunk_id "
                         "WHERE s.relation_id = r.id ORDER BY s.chunk_id LIMIT 1)")
# A relation's description as read: the sentence it was first inserted with (``store.graph_writes.ensure_relations``).
DESCRIPTION = f"coalesce(r.description, {FIRST_SOURCE_SENTENCE}, '')"

# Relation descriptions derived where they can be (issue 23's size goal): ``relations.description`` is NULL where
# the sentence a relation was first inserted with is its lowest-chunk-id source's sentence (``DESCRIPTION`` reads
# that), and holds the text only where the two differ; ``store.writes`` stores the text before any change of a
# relation's sources would change what NULL reads as. SQLite cannot drop NOT NULL from a column, so the column is
# dropped and added again, the texts that stay parked in a table of their own meanwhile.
SCHEMA_DERIVED_DESCRIPTIONS: list[str] = [
    f"""CREATE TABLE kept_descriptions AS SELECT r.id AS id, r.description AS description FROM relations r
        WHERE r.description IS NOT {FIRST_SOURCE_SENTENCE}""",
    "ALTER TABLE relations DROP COLUMN description",
    "ALTER TABLE relations ADD COLUMN description TEXT",
    """UPDATE relations SET description = (SELECT k.description FROM kept_descriptions k WHERE k.id = relations.id)
        WHERE id IN (SELECT id FROM kept_descriptions)""",
    "DROP TABLE kept_descriptions",
]

# The full-text index of triple texts was written on every relation insert and never searched.
SCHEMA_NO_RELATION_FTS: list[str] = ["DROP TABLE IF EXISTS relations_fts"]

# Obsidian embeds (``ingest.embeds``): a chunk of embedded text cites the embedded file (``cite_doc``, NULL: its own
# document), and ``embeds`` says which names each document embeds, so a change to one re-indexes its embedders.
SCHEMA_EMBEDS: list[str] = [
    "ALTER TABLE chunks ADD COLUMN cite_doc TEXT",
    """CREATE TABLE embeds (
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        target TEXT NOT NULL,
        PRIMARY KEY (doc_id, target)
    ) WITHOUT ROWID""",
    "CREATE INDEX embeds_target ON embeds(target)",
]

# Documents and folders keyed by machine (issue 39): ``machine`` is ``store.machine.this_machine().id`` of the machine
# whose file it is, so the same absolute path on two machines is two documents. SQLite cannot change a column's
# UNIQUE, so both tables are made again (``Database._migrate`` runs migrations with foreign keys off, as SQLite's
# own procedure for this asks); the rows of a store made before get the migrating machine (``machines.claim``).
SCHEMA_MACHINES: list[str] = [
    """CREATE TABLE machines (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        first_seen REAL NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    """CREATE TABLE documents_keyed (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        content_hash TEXT NOT NULL DEFAULT '',
        mtime REAL NOT NULL DEFAULT 0,
        size INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'indexed' CHECK (status IN ('indexed', 'skipped')),
        reason TEXT NOT NULL DEFAULT '',
        indexed_at REAL NOT NULL DEFAULT 0,
        headings TEXT NOT NULL DEFAULT '[]',
        links TEXT NOT NULL DEFAULT '[]',
        machine TEXT NOT NULL DEFAULT '',
        UNIQUE (machine, path)
    )""",
    """INSERT INTO documents_keyed(id, path, title, content_hash, mtime, size, status, reason, indexed_at, headings,
        links) SELECT id, path, title, content_hash, mtime, size, status, reason, indexed_at, headings, links
        FROM documents""",
    "DROP TABLE documents",
    "ALTER TABLE documents_keyed RENAME TO documents",
    "CREATE INDEX documents_hash ON documents(content_hash)",
    # key columns first: SQLite 3.40's integrity_check reports NULLs in a WITHOUT ROWID table whose key trails
    """CREATE TABLE folders_keyed (
        machine TEXT NOT NULL DEFAULT '',
        path TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('watched', 'indexed', 'removed')),
        changed_at REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (machine, path)
    ) WITHOUT ROWID""",
    "INSERT INTO folders_keyed(path, state, changed_at) SELECT path, state, changed_at FROM folders",
    "DROP TABLE folders",
    "ALTER TABLE folders_keyed RENAME TO folders",
]

# BM25 postings of the chunks (issue 39): FTS5's terms of a chunk's text and title with their occurrences (what its
# instance table lists), one row per term and chunk, so a large store's query reads only its own terms' postings;
# empty until the store grows past ``bm25.MAX_POSTINGS`` tokens (``store.bm25_terms.keep_postings`` fills it then).
SCHEMA_CHUNK_TERMS: list[str] = [
    """CREATE TABLE IF NOT EXISTS chunk_terms (
        term TEXT NOT NULL,
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, chunk_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS chunk_terms_chunk ON chunk_terms(chunk_id)",
]

MIGRATIONS: list[list[str]] = [SCHEMA_V1, SCHEMA_FOLDERS_AND_FILE_SPANS, SCHEMA_NAMES, SCHEMA_NER,
                               SCHEMA_GRAPH_VECTORS_COMPOSED, SCHEMA_SOURCE_SPANS_ONLY, SCHEMA_LINK_NAMES,
                               SCHEMA_VECTOR_NORMS, SCHEMA_DERIVED_DESCRIPTIONS, SCHEMA_NO_RELATION_FTS,
                               SCHEMA_EMBEDS, SCHEMA_MACHINES, SCHEMA_CHUNK_TERMS]
SCHEMA_VERSION = len(MIGRATIONS)
MACHINES_VERSION = MIGRATIONS.index(SCHEMA_MACHINES) + 1  # the schema version from which rows have a machine

VECTOR_TABLES = ("chunk_vec",)


def vector_table_ddl(dim: int) -> list[str]:
    """``vec0`` tables keyed by the owning row's id, cosine distance."""
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0(embedding float[{dim}] distance_metric=cosine)"
        for name in VECTOR_TABLES
    ]
