"""The offline HTML view: element building by hand, and the page rendered by headless Chromium."""

from __future__ import annotations

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
    els = build_elements(result, None, ShowParams())
    kinds = sorted(e["data"]["kind"] for e in els if e["group"] == "edges")
    assert kinds == ["cites", "path", "path"]
    assert sum(e["group"] == "nodes" for e in els) == 4


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
