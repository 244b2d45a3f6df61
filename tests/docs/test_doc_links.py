"""Documents point inside the repository only, and every repository file they cite exists.

The documents are README.md, docs/*.md and deploy/*.md; the code is every
Python file of service/, workers/ and dashboards/ (its comments and docstrings
cite docs/*.md). Tests may use scratch directories, so only their citations of
docs/*.md are checked.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.markdown import ROOT

DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "deploy").glob("*.md")])
CODE = sorted(p for top in ("service", "workers", "dashboards") for p in (ROOT / top).rglob("*.py"))
TESTS = sorted((ROOT / "tests").rglob("*.py"))
# A path out of the tree: a sibling checkout (`../shared/...`), this machine's directories, a home.
OUTSIDE = re.compile(r"(?<![\w.])(?:\.\./)+shared\b|(?<![\w.])shared/|(?<![\w:/])/(?:work|home|tmp|root)/|~/")
# A repository file cited in prose: `docs/otlp.md`, `service/api/app.py`, `deploy/prometheus/ragmon.rules.yml`.
CITED = re.compile(
    r"(?<![\w./-])((?:docs|deploy|service|workers|dashboards|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_]"
    r"\.(?:md|py|yml|yaml|json|toml|sh))\b"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text outside fenced code blocks (an example file may hold a path relative to itself)."""
    return FENCE.sub("", text)


def test_there_are_documents_and_code() -> None:
    assert len(DOCUMENTS) >= 10 and len(CODE) >= 100


def _outside(path: Path) -> list[str]:
    text = path.read_text()
    found = [m.group(0) for m in OUTSIDE.finditer(_prose(text) if path.suffix == ".md" else text)]
    for target in LINK.findall(_prose(text)) if path.suffix == ".md" else []:
        if re.match(r"[a-z]+:|#", target):
            continue  # a URL or an anchor on the same page
        resolved = (path.parent / target.split("#")[0]).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            found.append(target)
    return found


def test_no_document_points_outside_the_repository() -> None:
    found = {_name(p): f for p in DOCUMENTS + CODE if (f := _outside(p))}
    assert found == {}, "paths outside the repository, or links to nothing"


def test_every_cited_document_exists() -> None:
    cited = {
        (_name(path), c) for path in DOCUMENTS for c in CITED.findall(path.read_text()) if "NAME" not in c
    }
    assert len(cited) > 50, "the documents' citations were read"
    assert sorted((where, c) for where, c in cited if not (ROOT / c).exists()) == []


def test_code_and_tests_cite_only_documents_that_exist() -> None:
    cited = {
        (_name(path), c)
        for path in CODE + TESTS
        for c in re.findall(r"\bdocs/[A-Za-z0-9_-]+\.md\b", path.read_text())
    }
    assert len(cited) > 20, "the code's citations were read"
    assert sorted((where, c) for where, c in cited if not (ROOT / c).exists()) == []


# `docs/otlp.md, "Section"` or `docs/otlp.md ("Section", "Other")`: a section cited by its heading,
# or by the bold label a paragraph or a bullet opens with ("* **Power** (power.py) ...").
SECTION = re.compile(r'\b(docs/[a-z_-]+\.md|README\.md),? \(?("[^"\n]+"(?:, "[^"\n]+")*)')


def test_every_cited_section_is_a_heading_of_its_document() -> None:
    sources = DOCUMENTS + CODE + TESTS
    cited = {
        (_name(path), doc, name)
        for path in sources
        for doc, names in SECTION.findall(path.read_text())
        for name in re.findall(r'"([^"]+)"', names)
        if path != Path(__file__)  # this file's examples
    }
    assert len(cited) > 20, "the citations were read"
    wrong = []
    for where, doc, name in sorted(cited):
        text = (ROOT / doc).read_text() if (ROOT / doc).exists() else ""
        headings = re.findall(r"^#+ (.+)$", text, re.M) + re.findall(
            r"^(?:\* )?\*\*([^*\n]+)\*\*", text, re.M
        )
        # A heading may be cited by its first words ("Definitions" for "Definitions the workers compute").
        if not any(h.startswith(name) and not h[len(name) : len(name) + 1].isalnum() for h in headings):
            wrong.append((where, doc, name))
    assert wrong == [], "\n".join(map(str, wrong))
