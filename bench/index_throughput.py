"""Indexing throughput: whole pipeline vs raw embedding on the same chunk texts, peak RSS, one-file re-index.

    python bench/index_throughput.py [--limit N] [--corpus ultradomain|2wiki|both] [--json]

ultradomain-mix: each of the 61 long contexts becomes a .txt file; 2wikimultihopqa: one .txt per passage (6,119),
plus one ~10 KB note whose edit is then re-indexed (watcher path ``apply_changes`` and a full ``index_paths`` scan).
Pipeline chunks/s counts everything (parse, chunk, embed, extract, write, refresh); raw embedding chunks/s encodes
the same chunk texts in one call of the same embedder in the same process (packed when the model allows, as in
the pipeline; ``bench/packing.py`` compares packing with the model's own ``encode``).

The machine is shared and its speed drifts by several percent within minutes, so the raw pass runs twice, just
before the pipeline (on the texts the parser and chunker give, checked equal to the stored chunks afterwards) and
just after it; ``pipeline_vs_raw`` uses their mean, and each is reported. ``pipeline_model_seconds`` is the time
the pipeline itself spent in the model (chunks in float32; graph vectors at ``extract.graph_vector_precision``).
Beside wall seconds every part also reports the process's CPU seconds (all its threads), which other jobs on a
shared machine move far less: ``cpu_pipeline_vs_raw`` is the ratio of those, and ``pipeline_shares`` splits the
pipeline's wall time into chunk passes, NER, graph vectors and the rest (a split that drift moves little).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path("/work/shared/data")


def write_corpus(name: str, folder: Path, limit: int | None) -> Path | None:
    """Write the corpus as .txt files; for 2wiki also a ~10 KB note (returned) for the edit test."""
    folder.mkdir(parents=True)
    if name == "ultradomain":
        items = json.loads((DATA / "ultradomain-mix" / "mix_unique_contexts.json").read_text(encoding="utf-8"))
        for i, text in enumerate(items[:limit]):
            (folder / f"context{i:03d}.txt").write_text(text, encoding="utf-8")
        return None
    passages = json.loads((DATA / "2wikimultihopqa" / "corpus.json").read_text(encoding="utf-8"))
    for i, p in enumerate(passages[:limit]):
        (folder / f"p{i:05d}.txt").write_text(f"{p['title']}\n\n{p['text']}", encoding="utf-8")
    note, parts = folder / "ten-kb-note.txt", []
    for p in passages[-200:]:
        parts.append(p["text"])
        if sum(len(x) for x in parts) >= 10_000:
            break
    note.write_text("\n\n".join(parts)[:10_240], encoding="utf-8")
    return note


def chunk_texts(folder: Path, settings: Any, emb: Any) -> list[str]:
    """The chunk texts of every file under ``folder``, from the parser and chunker the pipeline uses."""
    from pathweaver.ingest.chunker import chunk_text
    from pathweaver.ingest.parsers import parse_file

    ing = settings.ingest
    texts = []
    for path in sorted(folder.iterdir()):
        doc = parse_file(path, path.read_bytes())
        texts += [c.text for c in chunk_text(doc.text, emb.tokenize(doc.text), ing.chunk_tokens, ing.chunk_overlap,
                                             doc.headings)]
    return texts


class TimedEmbedder:
    """The embedder, with the seconds spent in ``encode`` added up per precision."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name, self.seconds, self.cpu = inner, inner.model_name, {}, {}

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.encode(texts, batch_size, precision, invariant)
        finally:
            self.seconds[precision] = self.seconds.get(precision, 0.0) + time.perf_counter() - start
            self.cpu[precision] = self.cpu.get(precision, 0.0) + time.process_time() - cpu

    def batch_invariant(self, precision: str = "float32") -> bool:
        return bool(self.inner.batch_invariant(precision))

    def tokenize(self, text: str) -> list[tuple[int, int]]:
        return self.inner.tokenize(text)


def raw_seconds(emb: Any, texts: list[str], batch_size: int) -> tuple[float, float]:
    """Wall and process CPU seconds of one ``encode`` of ``texts``."""
    start, cpu = time.perf_counter(), time.process_time()
    emb.encode(texts, batch_size=batch_size)
    return time.perf_counter() - start, time.process_time() - cpu


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the spaCy pass's forked ones)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_ner(seconds: dict[str, float], cpu: dict[str, float]) -> None:
    """Count the wall (and CPU, forked children's included) seconds the pipeline spends in the spaCy pass
    (``extract.ner.entity_spans``) into ``seconds`` (and ``cpu``)."""
    from pathweaver.extract import ner

    plain = ner.entity_spans

    def spans(texts: Any, model: str, batch_size: int = ner.BATCH_SIZE, processes: int = 1) -> Any:
        start, cpu0, kids0 = time.perf_counter(), time.process_time(), children_cpu()
        try:
            return plain(texts, model, batch_size, processes)
        finally:
            seconds["ner"] = seconds.get("ner", 0.0) + time.perf_counter() - start
            cpu["ner"] = cpu.get("ner", 0.0) + time.process_time() - cpu0 + children_cpu() - kids0

    ner.entity_spans = spans


def store_bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in store.rglob("*") if f.is_file())


def run(name: str, limit: int | None, workdir: Path, entities: str | None = None,
        ner_processes: int | None = None) -> dict[str, Any]:
    from pathweaver.config import Settings
    from pathweaver.ingest.pipeline import Indexer
    from pathweaver.models.embedder import configure_threads, get_embedder
    from pathweaver.store.db import Database

    configure_threads()
    load_start = [round(x, 2) for x in os.getloadavg()]
    folder, store = workdir / name / "files", workdir / name / "store"
    note = write_corpus(name, folder, limit)
    emb = get_embedder()
    emb.encode(["warm up the model"])
    settings = Settings(store_dir=store)
    if entities:
        settings.extract.entities = entities
    if ner_processes is not None:
        settings.extract.ner_processes = ner_processes
    planned = chunk_texts(folder, settings, emb)
    raw_before, raw_cpu_before = raw_seconds(emb, planned, settings.ingest.batch_size)
    timed = TimedEmbedder(emb)
    timed_ner(timed.seconds, timed.cpu)
    with Database(store) as db:
        indexer = Indexer(db, settings, timed)
        start, cpu = time.perf_counter(), time.process_time() + children_cpu()
        report = indexer.index_paths([folder])
        pipeline_s, pipeline_cpu = time.perf_counter() - start, time.process_time() + children_cpu() - cpu
        model_s, model_cpu = dict(timed.seconds), dict(timed.cpu)
        texts = [r[0] for r in db.conn.execute("SELECT text FROM chunks ORDER BY id")]
        if sorted(texts) != sorted(planned):
            raise SystemExit("the chunker's texts differ from the stored chunks: the raw passes would not compare")
        stats = {k: db.conn.execute(f"SELECT count(*) FROM {k}").fetchone()[0]
                 for k in ("documents", "chunks", "entities", "relations", "synonyms", "mentions")}
        raw_after, raw_cpu_after = raw_seconds(emb, texts, settings.ingest.batch_size)
        raw_s, raw_cpu = (raw_before + raw_after) / 2, (raw_cpu_before + raw_cpu_after) / 2
        parts = {"chunk_passes": model_s.get("float32", 0.0), "ner": model_s.get("ner", 0.0),
                 "graph_vectors": sum(v for k, v in model_s.items() if k not in ("float32", "ner"))}
        parts["rest"] = pipeline_s - sum(parts.values())  # negative only if NER overlapped the model passes
        out: dict[str, Any] = {
            "corpus": name, "entities_setting": settings.extract.entities,
            "ner_processes": settings.extract.ner_processes, "files": len(list(folder.iterdir())),
            **stats, "store_mb": round(store_bytes(store) / 2**20, 1),
            "pipeline_seconds": round(pipeline_s, 2), "refresh_seconds": round(
                indexer.last_refresh.seconds if indexer.last_refresh else 0.0, 2),
            "pipeline_model_seconds": {k: round(v, 2) for k, v in model_s.items()},
            "pipeline_chunks_per_s": round(len(texts) / pipeline_s, 2),
            "raw_embedding_seconds_before": round(raw_before, 2), "raw_embedding_seconds_after": round(raw_after, 2),
            "raw_embedding_seconds": round(raw_s, 2), "raw_embedding_chunks_per_s": round(len(texts) / raw_s, 2),
            "pipeline_vs_raw": round(raw_s / pipeline_s, 3),
            "pipeline_shares": {k: round(v / pipeline_s, 3) for k, v in parts.items()},
            "pipeline_cpu_seconds": round(pipeline_cpu, 2),
            "pipeline_model_cpu_seconds": {k: round(v, 2) for k, v in model_cpu.items()},
            "raw_embedding_cpu_seconds_before": round(raw_cpu_before, 2),
            "raw_embedding_cpu_seconds_after": round(raw_cpu_after, 2),
            "cpu_pipeline_vs_raw": round(raw_cpu / pipeline_cpu, 3),
            "load_average_start": load_start,
            "load_average_end": [round(x, 2) for x in os.getloadavg()], "errors": report.errors,
        }
        if note is not None:
            with open(note, "a", encoding="utf-8") as f:
                f.write("\nThis sentence was added by the benchmark to edit the note.")
            start = time.perf_counter()
            edit = indexer.apply_changes({note}, set())
            out["reindex_10kb_apply_changes_s"] = round(time.perf_counter() - start, 3)
            out["reindex_10kb_refreshed"] = edit.refreshed
            with open(note, "a", encoding="utf-8") as f:
                f.write("\nAnd a second edit.")
            start = time.perf_counter()
            indexer.index_paths([folder])
            out["reindex_10kb_full_scan_s"] = round(time.perf_counter() - start, 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false"),
                       ("OPENBLAS_NUM_THREADS", "1")):
        os.environ.setdefault(key, value)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="index only the first N documents of each corpus")
    parser.add_argument("--corpus", choices=("ultradomain", "2wiki", "both"), default="both")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--entities", default=None, help="extract.entities for the pipeline (default: the setting's)")
    parser.add_argument("--ner-processes", type=int, default=None,
                        help="extract.ner_processes for the pipeline (default: the setting's)")
    args = parser.parse_args(argv)
    names = ["ultradomain", "2wiki"] if args.corpus == "both" else [args.corpus]
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as tmp:
        results = [run(n, args.limit, Path(tmp), args.entities, args.ner_processes) for n in names]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    keys = [k for k in results[0] if k != "errors"]
    print("| " + " | ".join(["metric"] + [r["corpus"] for r in results]) + " |")
    print("|" + "---|" * (len(results) + 1))
    for k in keys[1:]:
        print("| " + " | ".join([k] + [str(r.get(k, "")) for r in results]) + " |")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
