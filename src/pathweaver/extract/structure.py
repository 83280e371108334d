"""Entities and relations that authors already wrote down: titles, headings and links (DESIGN principle 7)."""

from __future__ import annotations

import re

from pathweaver.text import normalize

LINK_LABEL = "links to"
_SECTION_NUMBER_RE = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[ivxlc]+\.)\s+")


def _clean(name: str) -> str:
    """Normalised name without a leading section number ("2.1 Background" -> "background"); '' if unusable."""
    name = _SECTION_NUMBER_RE.sub("", normalize(name))
    name = normalize(name)
    return name if any(ch.isalpha() for ch in name) else ""


def heading_name(text: str) -> str:
    """The entity name of a heading (as ``structural_entities`` gives it); '' if unusable."""
    return _clean(text)


def structural_entities(
    title: str, headings: list[tuple[int, str]], links: list[str]
) -> list[tuple[str, str]]:
    """(normalised name, kind) for the title, each heading and each link target; kind is "title", "heading" or
    "link". Names without letters are skipped; each name appears once, with its first (strongest) kind."""
    out: dict[str, str] = {}
    candidates = (
        [(title, "title")] + [(h, "heading") for _, h in headings] + [(link, "link") for link in links]
    )
    for raw, kind in candidates:
        name = _clean(raw)
        if name and name not in out:
            out[name] = kind
    return list(out.items())


def link_relations(title: str, links: list[str]) -> list[tuple[str, str, str]]:
    """(normalised title, normalised link target, "links to") for each distinct link that is not a self-link."""
    src = _clean(title)
    if not src:
        return []
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for link in links:
        dst = _clean(link)
        if dst and dst != src and dst not in seen:
            seen.add(dst)
            out.append((src, dst, LINK_LABEL))
    return out
