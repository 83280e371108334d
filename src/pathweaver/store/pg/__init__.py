"""The PostgreSQL + pgvector backend of the store (``--store postgresql://...``); needs the ``postgres`` extra."""
