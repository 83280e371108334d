"""The offline HTML view: element building by hand, and the page rendered by headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.viz.show import ShowParams, build_elements, render_html

ARTIFACTS = Path(__file__).parent / "artifacts"


def _snapshot() -> GraphSnapshot:
    return GraphSnapshot.from_arrays(
        entities=["Lothair II", "Ermengarde of Tours", "Tours", "Teutberga"],
        relations=[(0, 1, "mother"), (1, 2, "born in"), (0, 3, "married")],
        passages=["Lothair II was the son of Ermengarde of Tours.", "Ermengarde of Tours died on 20 March 851."],
        mentions=[(0, 0, 2), (0, 1, 1), (1, 1, 1), (1, 2, 1)],
    )


def _result() -> dict:
    snap = _snapshot()
    chunks = [
        {"doc": snap.chunk_docs[p], "title": snap.chunk_titles[p], "chunk_id": int(snap.chunk_ids[p]),
         "score": s, "text": snap.chunk_texts[p], "span": [0, len(snap.chunk_texts[p])]}
        for p, s in ((1, 0.9), (0, 0.7))
    ]
    return {
        "method": "mcmi",
        "chunks": chunks,
        "paths": [],
        "subgraph": {
            "nodes": ["Lothair II", "Ermengarde of Tours", "Tours"],
            "edges": [["Lothair II", "Ermengarde of Tours", 0.2], ["Ermengarde of Tours", "Tours", 0.6]],
            "text": "",
            "stats": {},
            "node_scores": {"Lothair II": 0.5, "Ermengarde of Tours": 0.3, "Tours": 0.1},
        },
        "triples": [],
    }


def test_elements_sizes_and_widths_follow_scores() -> None:
    els = build_elements(_result(), _snapshot(), ShowParams(min_node_px=10, max_node_px=50))
    nodes = {e["data"]["id"]: e["data"] for e in els if e["group"] == "nodes"}
    edges = [e["data"] for e in els if e["group"] == "edges"]
    # 3 subgraph entities + 2 cited chunks; Teutberga is not in the subgraph and not drawn
    assert set(nodes) == {"ent:Lothair II", "ent:Ermengarde of Tours", "ent:Tours", "chunk:1", "chunk:2"}
    # sizes scale linearly from 1.3*min (lowest score) to max (highest score): 13, 13+(0.2/0.4)*37, 50
    assert nodes["ent:Lothair II"]["size"] == 50
    assert nodes["ent:Tours"]["size"] == 13
    assert nodes["ent:Ermengarde of Tours"]["size"] == pytest.approx(31.5)
    sub = {(e["source"], e["target"]): e["width"] for e in edges if e["kind"] == "subgraph"}
    # strength = 1 - cost/max_cost: 0.667 (thick) vs 0 (thin)
    assert sub[("ent:Lothair II", "ent:Ermengarde of Tours")] == 8.0
    assert sub[("ent:Ermengarde of Tours", "ent:Tours")] == 1.0
    mentions = {(e["source"], e["target"]) for e in edges if e["kind"] == "mention"}
    assert mentions == {("chunk:1", "ent:Lothair II"), ("chunk:1", "ent:Ermengarde of Tours"),
                        ("chunk:2", "ent:Ermengarde of Tours"), ("chunk:2", "ent:Tours")}


def test_paths_draw_nodes_edges_and_citations() -> None:
    result = {"chunks": [], "subgraph": None, "paths": [{
        "nodes": ["A", "B", "C"], "relations": ["r1", "r2"], "reliability": 0.4, "text": "",
        "citations": [{"doc": "a.md", "title": "a", "chunk_id": 7, "span": [0, 3]}]}]}
    result["paths"].append({"nodes": ["D", "B"], "relations": ["a much longer relation label here"],
                            "reliability": 0.9, "text": "", "citations": []})
    els = build_elements(result, None, ShowParams())
    kinds = sorted(e["data"]["kind"] for e in els if e["group"] == "edges")
    assert kinds == ["path", "path", "path"]  # the cited chunks are listed beside the drawing, not drawn
    nodes = [e for e in els if e["group"] == "nodes"]
    # one row per path, the most reliable on top; "B" is drawn in each row it is on
    rows = {e["data"]["label"]: e["position"] for e in nodes if e["position"]["y"] == 0}
    assert set(rows) == {"D", "B"} and rows["D"]["x"] == 0
    assert sorted(e["data"]["label"] for e in nodes if e["position"]["y"] > 0) == ["A", "B", "C"]
    # a long label keeps its two nodes further apart than a short one does
    second = sorted(e["position"]["x"] for e in nodes if e["position"]["y"] > 0)
    assert rows["B"]["x"] > second[1] - second[0] > 0


def test_bad_params_are_refused() -> None:
    with pytest.raises(ConfigError):
        render_html(_result(), None, "q", "mcmi", ShowParams(min_node_px=40, max_node_px=10))


def test_page_is_self_contained() -> None:
    page = render_html(_result(), _snapshot(), "When did Lothair II's mother die? </script>", "mcmi")
    assert 'data-node-count="5"' in page and "window.PW_NODE_COUNT = 5;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "<link" not in page.lower() and "@import" not in page
    assert page.count("</script>") == 4  # the question's "</script>" was escaped


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    page = tmp_path / "show.html"
    page.write_text(render_html(_result(), _snapshot(), "When did Lothair II's mother die?", "mcmi"),
                    encoding="utf-8")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
              f"--user-data-dir={tmp_path / 'profile'}", '--host-resolver-rules=MAP * ~NOTFOUND',
              "--virtual-time-budget=5000"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<span id="pw-rendered-nodes">5</span>' in dom.stdout
    assert 'data-rendered-nodes="5"' in dom.stdout and 'data-rendered-edges="6"' in dom.stdout
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "show.png"
    shot.unlink(missing_ok=True)
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1200,800", page.as_uri()],
                   capture_output=True, text=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000


def test_render_for_question_on_a_real_store(indexed, tmp_path: Path) -> None:
    from pathweaver.viz.show import render_for_question

    page = render_for_question(indexed, "Where was Marie Curie born?", "pathrag", top_k=3)
    count = int(re.search(r'data-node-count="(\d+)"', page).group(1))
    assert count >= 3  # at least the three cited chunks, plus path entities
    assert page.count('<li class="chunk">') == 3
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html_file = tmp_path / "real.html"
    html_file.write_text(page, encoding="utf-8")
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", "--dump-dom", html_file.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert f'<span id="pw-rendered-nodes">{count}</span>' in dom.stdout


FILMS = {
    "Inherent Vice (film)": "Inherent Vice is a 2014 American neo-noir film written and directed by Paul Thomas "
                            "Anderson, based on the novel by Thomas Pynchon.",
    "Paul Thomas Anderson": "Paul Thomas Anderson is an American filmmaker. He was born in Studio City, "
                            "California, and grew up in the San Fernando Valley.",
    "Studio City": "Studio City is a neighborhood of Los Angeles in the San Fernando Valley.",
    "The Master (2012 film)": "The Master is a 2012 American drama film starring Joaquin Phoenix.",
    "Jaws (film)": "Jaws is a 1975 American thriller film directed by Steven Spielberg, born in Cincinnati.",
    "Steven Spielberg": "Steven Spielberg is an American film director born in Cincinnati, Ohio.",
    "Blade Runner": "Blade Runner is a 1982 science fiction film directed by Ridley Scott, born in South Shields.",
}


def test_mcmi_picture_shows_the_film_its_director_and_his_birthplace(tmp_path: Path) -> None:
    """The issue's example question: MCMI's chunks, drawn as the picture's chunk nodes, are the film, its
    director and his birthplace, reached from the title the question names through the names the notes mention."""
    from pathweaver.service import Pathweaver
    from pathweaver.viz.show import render_for_question

    notes = tmp_path / "notes"
    notes.mkdir()
    for i, (title, body) in enumerate(FILMS.items()):
        (notes / f"{i:02d}.md").write_text(f"---\ntitle: {title}\n---\n# {title}\n\n{body}\n", "utf-8")
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    try:
        pw.index([notes])
        question = "Where was the director of film Inherent Vice born?"
        snapshot = pw.snapshot()
        result = pw.shape(pw.retrieve(question, method="mcmi", top_k=3), snapshot)
        page = render_for_question(pw, question, "mcmi", top_k=3)
    finally:
        pw.close()
    assert [c["title"] for c in result["chunks"]] == ["Inherent Vice (film)", "Paul Thomas Anderson", "Studio City"]
    assert "inherent vice" in result["subgraph"]["nodes"]  # the named title is a terminal of the subgraph
    labels = [e["data"].get("label", "") for e in build_elements(result, snapshot, ShowParams())
              if e["group"] == "nodes"]
    drawn = [label for label in labels if label.startswith("[")]
    assert drawn == ["[1] Inherent Vice (film)", "[2] Paul Thomas Anderson", "[3] Studio City"]
    assert all(label in page for label in drawn)


VAULT = {
    "Sync.md": "# Sync\n\nObsidian Sync keeps a vault the same on every device. Sync stores vaults in the "
               "[[Data regions]] the user picks, and keeps [[Version history]] for a year.\n",
    "Data regions.md": "# Data regions\n\nEuropean vaults are kept in Frankfurt. The [[Sync]] service offers "
                       "Frankfurt, Oregon and Singapore.\n",
    "Version history.md": "# Version history\n\nVersion history keeps every change of a note. [[Sync]] keeps a "
                          "year of it; [[File recovery]] keeps snapshots on the device.\n",
    "File recovery.md": "# File recovery\n\nFile recovery saves snapshots of notes every five minutes, on the "
                        "device, for [[Version history]] and [[Sync]] alike.\n",
    "Publish.md": "# Publish\n\nObsidian Publish hosts notes as a website. It is separate from [[Sync]].\n",
}


def label_report(page: str, tmp_path: Path, name: str, shot: Path | None = None) -> tuple[int, int]:
    """(labels drawn, pairs of them that overlap), as the page measures them in headless Chromium."""
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html_file = tmp_path / f"{name}.html"
    html_file.write_text(page, encoding="utf-8")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
              f"--user-data-dir={tmp_path / ('profile-' + name)}", "--host-resolver-rules=MAP * ~NOTFOUND",
              "--virtual-time-budget=5000", "--window-size=1400,900"]
    dom = subprocess.run([*common, "--dump-dom", html_file.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    labels = re.search(r'data-labels="(\d+)"', dom.stdout)
    overlaps = re.search(r'data-label-overlaps="(\d+)"', dom.stdout)
    assert labels and overlaps, dom.stdout[-2000:]
    if shot is not None:
        shot.unlink(missing_ok=True)
        subprocess.run([*common, f"--screenshot={shot}", html_file.as_uri()], capture_output=True, text=True,
                       timeout=180, check=True)
    return int(labels.group(1)), int(overlaps.group(1))


def test_a_notes_question_is_drawn_best_path_first_with_no_overlapping_labels(tmp_path: Path) -> None:
    """Issue 37: the paths of a notes question as rows, the most reliable first, every name edge labelled as a
    mention with the sentence that names the other note, labels that do not overlap, the chunks listed beside."""
    from pathweaver.service import Pathweaver
    from pathweaver.viz.show import render_for_question

    notes = tmp_path / "vault"
    notes.mkdir()
    for name, text in VAULT.items():
        (notes / name).write_text(text, "utf-8")
    pw = Pathweaver.open(tmp_path / "store", overrides={"models": {"llm_backend": "none"}})
    question = "Where does Sync keep European vaults, and how long is version history kept?"
    try:
        pw.index([notes])
        shaped = pw.retrieve_json(question, method="pathrag", top_k=5)
        page = render_for_question(pw, question, "pathrag", top_k=5)
    finally:
        pw.close()
    assert shaped["paths"]
    relations = {r for p in shaped["paths"] for r in p["relations"]}
    assert relations and "synonym of" not in relations  # the notes' own links and mentions, no false synonyms
    texts = [p["text"] for p in shaped["paths"]]
    # a mention edge carries the sentence that names the other note; a link edge reads "links to"
    assert all("synonym of" not in t for t in texts) and any("--[links to" in t or "--[mentions: " in t
                                                                for t in texts)
    # the list beside the drawing: the paths best first, then the chunks
    listed = [float(x) for x in re.findall(r'<li class="path"><div class="meta">reliability ([0-9.]+)', page)]
    assert listed and listed == sorted(listed, reverse=True)
    assert page.count('<li class="chunk">') == len(shaped["chunks"])
    ARTIFACTS.mkdir(exist_ok=True)
    labels, overlaps = label_report(page, tmp_path, "notes", ARTIFACTS / "show-notes.png")
    assert labels >= 3 and overlaps == 0
    assert (ARTIFACTS / "show-notes.png").stat().st_size > 10_000


def test_the_overlap_count_sees_overlapping_labels(tmp_path: Path) -> None:
    """The check is real: a second node drawn where the first is gives two overlapping labels."""
    result = {"chunks": [], "subgraph": None, "paths": [
        {"nodes": ["Alpha", "Beta"], "relations": ["a label"], "reliability": 0.5, "text": "", "citations": []}]}
    first = next(e for e in build_elements(result, None, ShowParams()) if e["group"] == "nodes")
    twin = {**first, "data": {**first["data"], "id": "twin", "label": "Alpha twin"}}
    page = render_html(result, None, "q", "pathrag").replace('"elements": [', '"elements": [' + json.dumps(twin)
                                                              + ", ", 1)
    labels, overlaps = label_report(page, tmp_path, "twin")
    assert labels == 4 and overlaps >= 1
