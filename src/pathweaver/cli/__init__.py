"""``pathweaver`` command line: init, index, watch, refresh, stats, retrieve, plan, ask, doctor, serve, connect, eval,
export, show.

Heavy modules are imported inside each command, so ``pathweaver --help`` is instant. Errors the user can fix are
printed as one line (``error: ...``) with exit status 2; ``--json`` output is one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from pathweaver.cli import signals
from pathweaver.cli.commands import (
    cmd_ask,
    cmd_compact,
    cmd_connect,
    cmd_doctor,
    cmd_eval,
    cmd_export,
    cmd_index,
    cmd_init,
    cmd_machines,
    cmd_migrate,
    cmd_plan,
    cmd_refresh,
    cmd_retrieve,
    cmd_serve,
    cmd_show,
    cmd_stats,
    cmd_watch,
)
from pathweaver.config import DEFAULT_TOP_K
from pathweaver.numeric import heap
from pathweaver.retrieval.registry import ANSWER_METHOD, RETRIEVE_METHOD

EXIT_USER_ERROR = 2


def _set_offline_env() -> None:
    """Never wait on the network for a model name; keep BLAS from starving torch on small machines; let torch's
    idle OpenMP threads sleep instead of spinning, which on cores other programs also use cost the first index of
    the demo notes 40% more CPU and 35% more time (docs/benchmarks.md, "Install"). Set before torch loads its
    OpenMP runtime, which reads it once; a value the user set is kept."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("OPENBLAS_NUM_THREADS", "1"),
        ("OMP_WAIT_POLICY", "PASSIVE"),
    ):
        os.environ.setdefault(key, value)


# -- parser --------------------------------------------------------------------------------------------------
def _add_retrieval_flags(p: argparse.ArgumentParser, default_method: str | None,
                         default_help: str = "") -> None:
    p.add_argument("--method", default=default_method,
                   help="dense|bm25|hybrid|ppr|pathrag|mcmi|pooling|lego:<sbe|sae>+<sbr|osar|isar>|pank[:<method>]"
                        + default_help)
    p.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="method parameter (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pathweaver", description="Local graph-RAG over watched folders, with MCP tools.")
    parser.add_argument(
        "--store",
        help="store directory or postgresql:// URL (default: $PATHWEAVER_STORE, else one named after the folders the command names, in "
             "the user data directory; commands without folders use the only store there; eval uses ./.pathweaver)",
    )
    parser.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override a setting (repeatable)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="write a commented pathweaver.toml into the store")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_init)

    for name, fn, help_text in (
        ("index", cmd_index, "make this machine's documents in the store match these files and folders"),
        ("watch", cmd_watch, "index, then follow changes until SIGINT/SIGTERM"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("paths", nargs="+", metavar="PATH")
        p.add_argument("--keep-others", action="store_true",
                       help="keep this machine's documents outside PATHs (another machine's documents are never "
                            "removed: see $PATHWEAVER_MACHINE)")
        p.add_argument("--force", action="store_true",
                       help="delete documents outside PATHs even where a running server serves them")
        p.add_argument("--json", action="store_true")
        p.set_defaults(fn=fn)

    for name, fn, help_text in (
        ("refresh", cmd_refresh, "recompute what corpus statistics decide (ER entities, relations, synonyms)"),
        ("stats", cmd_stats, "store statistics and skipped files"),
        ("compact", cmd_compact, "give free pages back to the file system (VACUUM; no other process may use the store)"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true")
        p.set_defaults(fn=fn)

    p = sub.add_parser("machines", help="the machines whose documents the store holds ($PATHWEAVER_MACHINE names "
                                        "this one)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--adopt", metavar="NAME", help="take machine NAME's documents as this machine's (a new "
                       "computer, a container whose machine id changed); this machine's stay where both have a path")
    which.add_argument("--forget", metavar="NAME", help="delete machine NAME's documents (a machine that is gone)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_machines)

    p = sub.add_parser("migrate", help="copy a SQLite store into an empty PostgreSQL store (pgvector)")
    p.add_argument("source", metavar="SQLITE_STORE", help="the store directory")
    p.add_argument("target", metavar="URL", help="postgresql://user@host:port/db")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_migrate)

    p = sub.add_parser("retrieve", help="retrieve chunks, paths or a subgraph for a question")
    p.add_argument("text")
    _add_retrieval_flags(p, RETRIEVE_METHOD)
    p.add_argument("--keyword", action="append", help="keyword for PathRAG node retrieval (repeatable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_retrieve)

    p = sub.add_parser("plan", help="decompose a question into a DAG of sub-questions")
    p.add_argument("text")
    p.add_argument("--plan-json", help="validate this plan instead of building one")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_plan)

    p = sub.add_parser("ask", help="answer a question with citations")
    p.add_argument("text")
    _add_retrieval_flags(p, "")
    p.add_argument("--decompose", action="store_true", help="plan a DAG of sub-questions first (PankRAG)")
    p.add_argument("--plan-json", help="use this plan (implies --decompose)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ask)

    p = sub.add_parser("doctor", help="what this installation uses: store, models, LLM backend and why, extras")
    p.add_argument("--watch", action="append", metavar="DIR", help="the folders a server would watch (its store)")
    p.add_argument("--probe", action="store_true", help="also measure whether vectors keep their bits in any batch")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_doctor)

    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p.add_argument("--watch", action="append", metavar="DIR", help="index and watch DIR; also an allowed root")
    p.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--token", default=None, help="bearer token required on every HTTP request")
    p.set_defaults(fn=cmd_serve)

    from pathweaver.connect import CLIENTS, SERVER_NAME

    p = sub.add_parser("connect", help="print (or --write) the MCP entry that starts this install for a client")
    p.add_argument("client", choices=tuple(CLIENTS))
    p.add_argument("--watch", action="append", metavar="DIR", help="a folder the server indexes and watches")
    p.add_argument("--store", dest="connect_store", metavar="DIR",
                   help="store directory (default: the one named after the --watch folders)")
    p.add_argument("--write", action="store_true",
                   help="merge the entry into the client's configuration file (keeping a .bak copy)")
    p.add_argument("--config", metavar="PATH", help="that file, when not the client's usual one")
    p.add_argument("--name", default=SERVER_NAME, help=f"the server's name in the client (default {SERVER_NAME})")
    p.set_defaults(fn=cmd_connect)

    p = sub.add_parser("eval", help="evaluate retrieval (or, with --answers, answers) on 2wiki, musique, hotpotqa "
                                         "or a notes benchmark folder (datasets/notes)")
    p.add_argument("dataset_dir", nargs="?")
    p.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    _add_retrieval_flags(p, None, f" (default: {RETRIEVE_METHOD}; with --answers, {ANSWER_METHOD} as ask uses)")
    p.add_argument("--history", action="store_true", help="print the ledger of earlier runs")
    p.add_argument("--dataset", help="with --history: only this dataset")
    p.add_argument("--no-ledger", action="store_true", help="do not append this run to the ledger")
    p.add_argument("--answers", action="store_true",
                   help="score answers on the gold answers (exact match, token F1, answer support; on a "
                        "notes benchmark: key facts covered, and saying the notes don't say, per question kind)")
    p.add_argument("--answerer", choices=("ask", "extractive", "baseline"), default="ask",
                   help="with --answers: ask (configured backend), extractive, or baseline (best sentence of the "
                        "top dense chunk)")
    p.add_argument("--decompose", action="store_true", help="with --answers --answerer ask: plan first")
    p.add_argument("--details", action="store_true", help="with --answers: every question's prediction")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("export", help="export the graph with provenance")
    p.add_argument("--format", choices=("graphml", "parquet", "duckdb"), required=True)
    p.add_argument("out")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("show", help="write an offline HTML view of why these chunks were retrieved")
    p.add_argument("text")
    p.add_argument("--method", choices=("mcmi", "pathrag", "pooling"), default="mcmi")
    p.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    p.add_argument("--html", required=True)
    p.set_defaults(fn=cmd_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. As the program (``argv`` None) it also stops on SIGINT/SIGTERM within seconds and ends
    without the interpreter's shutdown when threads are left (``signals.exit_now``)."""
    _set_offline_env()
    heap.fix_mmap_threshold()
    parser = build_parser()
    args = parser.parse_args(argv)
    process = argv is None
    if process:
        signals.stop_on_signals()
    from pathweaver.errors import USER_ERRORS

    try:
        code = int(args.fn(args) or 0)
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_USER_ERROR
    except KeyboardInterrupt:
        code = 130 if signals.stop_code() is None else signals.stop_code()
    if process and (signals.stop_code() is not None or threading.active_count() > 1):
        signals.exit_now(code)
    return code

