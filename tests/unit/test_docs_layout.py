"""The README stays a front door and every reference page is one click from it (issue 31)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    targets = (m.group(1).split("#", 1)[0] for m in LINK.finditer(page.read_text()))
    return [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]


def broken_links(pages: list[Path]) -> list[str]:
    return [f"{page.name}: {target}" for page in pages
            for target in relative_links(page) if not (page.parent / target).exists()]


def test_the_readme_the_map_the_benchmarks_and_the_contributing_guide_stay_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    assert len((ROOT / "ARCHITECTURE.md").read_text().splitlines()) <= 450
    assert len((DOCS / "benchmarks.md").read_text().splitlines()) <= 400
    assert len((ROOT / "CONTRIBUTING.md").read_text().splitlines()) <= 150


def test_every_reference_page_is_one_click_from_the_readme() -> None:
    linked = {(ROOT / target).resolve() for target in relative_links(ROOT / "README.md")}
    pages = {page.resolve() for page in DOCS.glob("*.md")} | {(DOCS / "adr").resolve()}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - linked) == []


def test_relative_links_in_the_readme_and_docs_resolve(tmp_path: Path) -> None:
    stale = tmp_path / "page.md"
    stale.write_text("[gone](nowhere.md) [ok](page.md#top) [web](https://example.com)")
    assert broken_links([stale]) == ["page.md: nowhere.md"]
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "RELIABILITY.md",
             ROOT / "CONTRIBUTING.md", ROOT / "THIRD_PARTY_NOTICES.md",
             *sorted(DOCS.rglob("*.md"))]
    assert broken_links(pages) == []


def test_every_rest_route_is_in_the_rest_api_reference() -> None:
    from vera.api.app import build_app
    from vera.config import Settings

    page = (DOCS / "rest-api.md").read_text()
    paths = build_app(Settings()).openapi()["paths"]
    served = [(method.upper(), path) for path, operations in paths.items()
              for method in operations]
    served += [("GET", "/openapi.json")]
    assert len(served) > 20
    assert [f"{m} {p}" for m, p in served if f"| `{m} {p}` |" not in page] == []
