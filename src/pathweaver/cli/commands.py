"""The ``pathweaver`` commands, one function each (``cmd_<name>``), and what they share: the store a command opens
and its ``--set`` and ``--param`` flags. Heavy modules are imported inside each command, so ``--help`` is instant."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathweaver.cli.signals import stop_code
from pathweaver.cli_output import emit, fmt_answer, fmt_chunks, fmt_report, progress_bar
from pathweaver.config import CONFIG_FILE, ConfigError, parse_param
from pathweaver.retrieval.registry import ANSWER_METHOD, RETRIEVE_METHOD

if TYPE_CHECKING:
    from pathweaver.service import Pathweaver


# -- helpers -------------------------------------------------------------------------------------------------
def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--set section.key=value`` flags (``retrieval.<method>.key=value`` for a method's table) as a nested
    mapping for ``load_settings``."""
    out: dict[str, Any] = {}
    for item in getattr(args, "set", None) or []:
        name, value = parse_param(item)
        *tables, key = name.split(".")
        if not tables or not all(tables) or not key:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        node = out
        for table in tables:
            node = node.setdefault(table, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {table!r} was set to a value, not a table")
        node[key] = value
    return out


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return dict(parse_param(p) for p in (getattr(args, "param", None) or []))


def _store(args: argparse.Namespace, folders: list[str] | None = None) -> Path:
    """``--store``, else ``$PATHWEAVER_STORE``, else the user data directory's store for ``folders`` (the paths a
    command names), else its only store (``locations``); for a postgresql:// URL, the directory of its settings."""
    from pathweaver.config import resolve_store_dir

    return resolve_store_dir(args.store, folders=folders or ())


def _location(args: argparse.Namespace, folders: list[str] | None = None) -> Path | str:
    """The store a command opens: a postgresql:// URL as given, else ``_store``'s directory."""
    from pathweaver.config import resolve_store_url

    return resolve_store_url(args.store) or _store(args, folders)


def _open(args: argparse.Namespace, readonly: bool = False, folders: list[str] | None = None) -> Pathweaver:
    from pathweaver.service import Pathweaver

    return Pathweaver.open(_location(args, folders), _overrides(args), readonly=readonly)


# -- commands ------------------------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    from pathweaver.config_template import default_config_text

    store = _store(args)
    store.mkdir(parents=True, exist_ok=True)
    target = store / CONFIG_FILE
    if target.exists() and not args.force:
        raise ConfigError(f"{target} exists; pass --force to overwrite it")
    target.write_text(default_config_text(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    with _open(args, folders=args.paths) as pw, progress_bar(args) as progress:
        report = pw.index([Path(p) for p in args.paths], exact=not args.keep_others, progress=progress,
                          force=args.force)
    emit(args, report.to_dict(), fmt_report)
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        data = pw.refresh()
    emit(args, data, lambda d: json.dumps(d, indent=2, default=str))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from pathweaver.config import is_postgres_url
    from pathweaver.store.pg.migrate import migrate

    if not is_postgres_url(args.target):
        raise ConfigError(f"migrate copies a SQLite store into PostgreSQL: TARGET must be a postgresql:// URL, "
                          f"got {args.target!r}")
    counts = migrate(Path(args.source), args.target)
    emit(args, counts, lambda d: "\n".join(f"{table:>18} {n:>10,} rows" for table, n in d.items()))
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from pathweaver.store.backend import open_database

    with open_database(_location(args)) as db:
        before = db.size()
        after = db.compact()
    emit(args, {"store": str(db.path), "bytes_before": before, "bytes_after": after},
          lambda d: f"{d['store']}: {d['bytes_before'] / 1e6:.1f} MB -> {d['bytes_after'] / 1e6:.1f} MB")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        data = pw.stats()

    def human(d: dict[str, Any]) -> str:
        keys = ("documents", "chunks", "entities", "relations", "synonyms", "mentions", "version")
        lines = [f"{k:>16}: {d[k]}" for k in keys]
        lines.append(f"{'embedding':>16}: {d.get('embedding_model')} ({d.get('embedding_dim')})")
        machines = d.get("machines", [])
        for m in machines if len(machines) > 1 else []:  # a team's store: whose documents are in it
            lines.append(f"{'machine':>16}: {m['name']}: {m['documents']} documents{' (this one)' if m['this'] else ''}")
        for s in d.get("skipped", []):
            lines.append(f"{'skipped':>16}: {s['path']}: {s['reason']}")
        return "\n".join(lines)

    emit(args, data, human)
    return 0


def cmd_machines(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        moved = {}
        if args.adopt:
            moved = {"adopted": args.adopt, "documents": pw.take_over_machine(args.adopt)}
        elif args.forget:
            moved = {"forgot": args.forget, "documents": pw.forget_machine(args.forget)}
        data = {**moved, "machines": pw.stats()["machines"]}

    def human(d: dict[str, Any]) -> str:
        lines = [f"adopted {d['documents']} documents of {d['adopted']}"] if "adopted" in d else []
        lines += [f"deleted {d['documents']} documents of {d['forgot']}"] if "forgot" in d else []
        lines += [f"{m['name']}: {m['documents']} documents{' (this machine)' if m['this'] else ''}"
                  for m in d["machines"]]
        return "\n".join(lines or ["no documents indexed yet"])

    emit(args, data, human)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from pathweaver.ingest.watcher import FolderWatcher

    roots = [Path(p).resolve() for p in args.paths]
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        raise ConfigError(f"no such file or folder: {', '.join(missing)}")
    with _open(args, folders=args.paths) as pw:

        def on_batch(changed: set[Path], removed: set[Path]) -> None:
            rep = pw.apply_changes(changed, removed)
            emit(args, rep.to_dict(), fmt_report)
            sys.stdout.flush()

        # watch before indexing: a file edited while the index runs arrives as a batch, applied after it
        watcher = FolderWatcher(roots, on_batch, debounce_seconds=pw.settings.ingest.debounce_seconds)
        watcher.start()
        try:
            with progress_bar(args) as progress:
                report = pw.index(roots, exact=not args.keep_others, progress=progress, force=args.force)
            emit(args, report.to_dict(), fmt_report)
            if not args.json:
                print(f"watching {', '.join(map(str, roots))}; Ctrl-C to stop", file=sys.stderr)
            sys.stdout.flush()
            threading.Event().wait()  # until SIGINT or SIGTERM raises KeyboardInterrupt (``signals.stop_on_signals``)
        finally:
            watcher.stop(flush=stop_code() is None)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        data = pw.retrieve_json(args.text, args.method, args.top_k, _params(args), args.keyword or None)
    emit(args, data, fmt_chunks)
    return 0


def _read_plan(path: str | None) -> Any:
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read plan {path}: {exc}") from exc


def cmd_plan(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        data = pw.plan(args.text, _read_plan(args.plan_json))

    def human(d: dict[str, Any]) -> str:
        trace = d.get("trace") or {}
        fallback = f" (model fallback: {trace['fallback']})" if trace.get("fallback") and trace.get("backend") != "extractive" else ""
        lines = [f"source: {d['source']}; backend: {trace.get('backend', '?')}{fallback}"]
        for level_no, level in enumerate(d["levels"]):
            for node_id in level:
                node = next(n for n in d["nodes"] if n["id"] == node_id)
                deps = ", ".join(node["depends_on"]) or "-"
                lines.append(f"L{level_no} {node_id} [{node['relation']}; after {deps}] {node['question']}")
        return "\n".join(lines)

    emit(args, data, human)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    with _open(args) as pw:
        data = pw.ask(
            args.text,
            method=args.method,
            decompose=args.decompose,
            plan=_read_plan(args.plan_json),
            top_k=args.top_k,
            params=_params(args),
        )
    emit(args, data, fmt_answer)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from pathweaver.config import load_settings
    from pathweaver.doctor import diagnose, format_report
    from pathweaver.locations import DEFAULT_NAME, StoreChoiceError, stores_root

    try:
        store, choice = _location(args, args.watch), ""
    except StoreChoiceError as exc:  # several stores: say so, and report the rest for the default one
        store, choice = stores_root() / DEFAULT_NAME, str(exc)
    emit(args, diagnose(load_settings(store, _overrides(args)), choice, args.probe), format_report)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from pathweaver.server.app import run_server

    run_server(
        store_dir=_location(args, args.watch),
        watch=[Path(p) for p in args.watch or []],
        transport="http" if args.http else "stdio",
        host=args.host,
        port=args.port,
        token=args.token,
        overrides=_overrides(args),
    )
    return 0


def cmd_connect(args: argparse.Namespace) -> int:
    from pathweaver import connect

    client = connect.client_named(args.client)
    watch = [Path(p).expanduser().resolve() for p in args.watch or []]
    store_flag = args.connect_store or args.store
    store = _store(argparse.Namespace(store=store_flag), [str(p) for p in watch]).expanduser().resolve()
    server = connect.entry(client, store, watch)
    path = Path(args.config).expanduser() if args.config else client.path()
    for folder in watch:
        if not folder.is_dir():
            print(f"warning: {folder} is not a folder; the server refuses to start until it is", file=sys.stderr)
    if not args.write:
        print(connect.snippet(client, args.name, server))
        print(f"# {client.label}: add this to {path}, or run again with --write to merge it there", file=sys.stderr)
        return 0
    result = connect.write(path, client, args.name, server)
    kept = f", {result.others} other server(s) kept" if result.others else ""
    if result.action == "unchanged":
        print(f"{result.path}: {args.name!r} is already this entry; nothing written")
        return 0
    print(f"{result.path}: {args.name!r} {result.action}{kept}")
    if result.backup:
        print(f"the previous file is in {result.backup}")
    if result.comments_dropped:
        print(f"note: the comments and trailing commas of {result.path} are not kept by this rewrite; "
              f"{result.backup} has them")
    print(f"restart {client.label} to start the server")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from pathweaver.config import resolve_store_url
    from pathweaver.eval.summary import format_answers, format_retrieval
    from pathweaver.locations import EVAL_STORE_ROOT, explicit_store

    url = resolve_store_url(args.store)
    # on PostgreSQL the data set's corpus and the ledger stay in the URL's settings directory, its index in the
    # database (one data set at a time: another one replaces its documents)
    store = _store(args) if url else explicit_store(args.store) or Path(EVAL_STORE_ROOT)
    overrides = {**_overrides(args), "store": {"url": url}} if url else _overrides(args)
    if args.history:
        from pathweaver.eval.ledger import Ledger

        ledger = Ledger.for_store(store)
        rows = ledger.history(dataset=args.dataset)
        emit(args, rows, ledger.format_history)
        return 0
    if not args.dataset_dir:
        raise ConfigError("eval needs DATASET_DIR (or --history)")
    if args.answers:
        from pathweaver.eval.answers import run_answer_eval

        data = run_answer_eval(
            Path(args.dataset_dir), args.split, args.method or ANSWER_METHOD, args.top_k, _params(args), store,
            answerer=args.answerer, decompose=args.decompose, overrides=overrides,
            record=not args.no_ledger, details=args.details,
        )
        emit(args, data, format_answers)
        return 0
    from pathweaver.eval.runner import run_eval

    data = run_eval(
        Path(args.dataset_dir), args.split, args.method or RETRIEVE_METHOD, args.top_k, _params(args), store,
        overrides=overrides, record=not args.no_ledger,
    )
    emit(args, data, format_retrieval)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pathweaver.export import export

    with _open(args, readonly=True) as pw:
        data = export(pw.reader, args.format, Path(args.out))
    emit(args, data, lambda d: f"wrote {args.out}: {d}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from pathweaver.viz.show import render_for_question

    with _open(args) as pw:
        html = render_for_question(pw, args.text, args.method, top_k=args.top_k)
    Path(args.html).write_text(html, encoding="utf-8")
    print(f"wrote {args.html}")
    return 0
