"""``make demo`` end to end: the demo corpus served over stdio to a real MCP client that offers no sampling.

With default settings the answer is extractive (no bundled SmolLM2 anywhere on the default path); the demo shows
the plan, the evidence with citations and the answer, and says how to get generated answers."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio

from pathweaver.demo import DEFAULT_QUESTION, demo_corpus, run_demo


def test_demo_shows_plan_evidence_and_an_extractive_answer(tmp_path: Path, monkeypatch: Any) -> None:
    for name in [k for k in os.environ if k.startswith("PATHWEAVER_")]:
        monkeypatch.delenv(name)  # the defaults a new user gets
    lines: list[str] = []
    record: list[tuple[str, dict, dict]] = []
    result = anyio.run(run_demo, demo_corpus(), DEFAULT_QUESTION, tmp_path, lines.append, record)
    text = "\n".join(lines)
    assert [name for name, _, _ in record] == ["decompose_query", "retrieve_paths", "build_mcmi", "answer"]
    assert "answers by: extractive (no MCP sampling" in text
    assert "1. plan: decompose_query (" in text and "\n   L0 #1 [after -] " in text
    assert "2. evidence: retrieve_paths (" in text and ".md, chunk " in text
    assert "3. answer (" in text and "written by: extractive" in text
    assert result["backend"] == "extractive" and result["llm"]["backend"] == "extractive"
    assert result["citations"] and all({"doc", "chunk_id", "span"} <= set(c) for c in result["citations"])
    assert "MCP sampling" in text and "models.openai_base_url" in text and "models.llm_model_path" in text
    assert "smollm" not in text.lower() and "llamacpp" not in text
    plan = record[0][2]
    assert record[3][1]["decompose"] == (len(plan["nodes"]) > 1)  # the answer runs the plan it showed
    # the question, answered right from the right notes: who warned him, and what Marley had been to him
    assert len(plan["nodes"]) == 2 and result["answer"].startswith("Jacob Marley [")
    assert "business partner" in result["answer"].split(";")[1]
    cited = {c["n"]: Path(c["doc"]).name for c in result["citations"]}
    assert {cited[int(n)] for n in re.findall(r"\[(\d+)\]", result["answer"])} <= {"Ebenezer Scrooge.md",
                                                                                     "Jacob Marley.md"}
