"""The course as a book (``python tools/book.py``): the site builds from the committed notebooks with no Sphinx
warning, every chapter, lab and guide has its page, every local link and asset resolves, nothing is loaded from
another site, the math is there for the site's own MathJax, the explorers show a note instead of a broken widget, and
no lab page or download holds a line of a solution or of a hidden test."""

import html as html_lib
import importlib.util
import json
import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from minilm.labs import HIDDEN, SOLUTION, read_notebook, student_version

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("book", ROOT / "tools" / "book.py")
book = importlib.util.module_from_spec(spec)
spec.loader.exec_module(book)

CHAPTERS = book.chapters()
LABS = book.labs()
GUIDES = ["index", "course", "training", "data", "library", "benchmarks", "instructors", "contributors"]
WIDGET = "application/vnd.jupyter.widget-view+json"
LINK = re.compile(r"""\b(href|src)\s*=\s*["']([^"']*)["']""")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for this module into a temporary folder (a Sphinx warning fails the build)."""
    index = book.build(tmp_path_factory.mktemp("book"))
    assert index.is_file()
    return index.parent


def pages(site: Path) -> list[Path]:
    """The site's pages (the theme's template macros in _static/ are no pages)."""
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


def text_of(page: Path) -> str:
    """What a reader sees: the page without its tags, entities decoded (code is split into highlighting spans)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", body))


@cache
def ids_in(page: Path) -> frozenset[str]:
    return frozenset(re.findall(r"""\bid\s*=\s*["']([^"']+)["']""", page.read_text(encoding="utf-8")))


def test_chapters_and_labs_are_found():
    assert len(CHAPTERS) == 10 and CHAPTERS[0].name == "00_transformer.ipynb"
    assert len(LABS) >= 10 and all(lab.name.startswith("lab") for lab in LABS)


def test_every_chapter_lab_and_guide_has_its_page_in_the_navigation(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    for name in GUIDES:
        assert (site / f"{name}.html").is_file(), name
        assert name == "index" or f'href="{name}.html"' in index, f"the front page's navigation lacks {name}"
    for ipynb in CHAPTERS:
        title = json.loads(ipynb.read_text(encoding="utf-8"))["cells"][0]["source"][0].removeprefix("# ").strip()
        page = site / "chapters" / f"{ipynb.stem}.html"
        assert page.is_file(), f"no page for {ipynb.name}"
        assert title in text_of(page), f"{page.name} does not show the chapter's title {title!r}"
        assert f'href="chapters/{ipynb.stem}.html"' in index
    for lab in LABS:
        page = site / "labs" / f"{lab.stem}.html"
        assert page.is_file(), f"no page for {lab.name}"
        assert f'href="labs/{lab.stem}.html"' in index
    assert "Quick start" in text_of(site / "index.html"), "the front page shows the README's first part"


def test_every_local_link_and_asset_resolves(site):
    broken, checked = [], 0
    for page in pages(site):
        for attribute, target in LINK.findall(page.read_text(encoding="utf-8")):
            parts = urlsplit(html_lib.unescape(target))
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "javascript:", "data:")):
                continue
            path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            checked += 1
            if not path.exists():
                broken.append(f"{page.relative_to(site)}: {attribute}={target}")
            elif parts.fragment and path.suffix == ".html" and unquote(parts.fragment) not in ids_in(path):
                broken.append(f"{page.relative_to(site)}: {target} (no such anchor)")
    assert checked > 1000
    assert not broken, "broken links:\n" + "\n".join(broken[:50])


def test_nothing_is_loaded_from_another_site(site):
    external = re.compile(r"^\s*(https?:)?//", re.I)
    found = []
    for page in pages(site):
        source = page.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*>", source, re.I):
            found += [f"{page.relative_to(site)}: {tag}" for _, target in LINK.findall(tag) if external.match(target)]
    for sheet in site.rglob("*.css"):
        for target in re.findall(r"""url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)""", sheet.read_text("utf-8")):
            found += [f"{sheet.relative_to(site)}: {t}" for t in target if t and external.match(t)]
    assert not found, "assets from other sites:\n" + "\n".join(found[:50])


def test_math_is_rendered_by_the_sites_own_mathjax(site):
    mathjax = site / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file() and mathjax.stat().st_size > 100_000
    with_math = 0
    for ipynb in CHAPTERS:
        source = (site / "chapters" / f"{ipynb.stem}.html").read_text(encoding="utf-8")
        spans = re.findall(r'<(?:span|div) class="math notranslate nohighlight">(.*?)</(?:span|div)>', source, re.S)
        if spans:
            with_math += 1
            assert 'src="../_static/mathjax/tex-chtml.js' in source, f"{ipynb.stem}: math without the local MathJax"
            assert all(s.strip().startswith(("\\(", "\\[")) for s in spans), "math must reach MathJax as TeX"
            stray = re.findall(r'.{40}\$<(?:span|div) class="math|</(?:span|div)>\$.{40}', source, re.S)
            assert not stray, f"{ipynb.stem}: $ signs left around math: {stray[:3]}"
    assert with_math >= 8, f"only {with_math} chapters show math"
    course = (site / "course.html").read_text(encoding="utf-8")  # the book's own Markdown pages: $...$ is math too
    assert '<span class="math notranslate nohighlight">\\(1/\\sqrt{d_k}\\)</span>' in course
    assert 'src="_static/mathjax/tex-chtml.js' in course


def test_no_page_shows_a_dollar_sign_outside_code_and_math(site):
    """Every $...$ and $$...$$ of the notebooks and Markdown pages reached MathJax (none of them writes a price)."""
    for page in pages(site):
        source = re.sub(r"<(script|style|pre|code)\b.*?</\1>", "", page.read_text(encoding="utf-8"), flags=re.S)
        source = re.sub(r'<(span|div) class="math notranslate nohighlight">.*?</\1>', "", source, flags=re.S)
        prose = html_lib.unescape(re.sub(r"<[^>]+>", "", source))
        stray = [prose[max(0, m.start() - 60) : m.end() + 20] for m in re.finditer(r"\$", prose)]
        assert not stray, f"{page.relative_to(site)}: math that MathJax will not see: {stray[:3]}"


def test_every_figure_is_on_its_chapter_page_and_no_widget_is(site):
    for ipynb in CHAPTERS:
        cells = json.loads(ipynb.read_text(encoding="utf-8"))["cells"]
        outputs = [out for cell in cells for out in cell.get("outputs", [])]
        figures = sum("image/png" in out.get("data", {}) for out in outputs)
        explorers = sum(any(WIDGET in out.get("data", {}) for out in cell.get("outputs", [])) for cell in cells)
        source = (site / "chapters" / f"{ipynb.stem}.html").read_text(encoding="utf-8")
        images = re.findall(r'<img[^>]+src="(\.\./_images/[^"]+\.png)"', source)
        assert len(images) == figures > 0, f"{ipynb.stem}: {len(images)} figures on the page, {figures} in the notebook"
        assert source.count("minilm-explorer-note") == explorers, f"{ipynb.stem}: one note per explorer"
        assert WIDGET not in source and "widget-view" not in source and "jupyter-widgets" not in source
        if explorers:
            note = f"open {ipynb.relative_to(ROOT).as_posix()} in JupyterLab to use it"
            assert note in " ".join(text_of(site / "chapters" / f"{ipynb.stem}.html").split())


def test_each_chapter_page_links_its_notebook_and_source_and_says_how_to_open_it(site):
    for ipynb in CHAPTERS:
        page = site / "chapters" / f"{ipynb.stem}.html"
        links = {(page.parent / target).resolve() for _, target in LINK.findall(page.read_text(encoding="utf-8"))}
        assert ipynb in links and ipynb.with_suffix(".py") in links, f"{page.name} does not link its files"
        assert f"jupyter lab chapters/{ipynb.name}" in text_of(page)


def test_the_repository_links_can_point_to_a_hosted_copy():
    nb = book.chapter_page(CHAPTERS[0], "https://example.org/minilm/blob/main")
    assert 'href="https://example.org/minilm/blob/main/chapters/00_transformer.ipynb"' in nb.cells[0].source
    text = "[Lab 5](../labs/lab05_albert.py), [C3](../chapters/03_bert.py), [b](../benchmarks/README.md)"
    assert book.site_links(text) == "[Lab 5](labs/lab05_albert.ipynb), [C3](chapters/03_bert.ipynb), [b](benchmarks.md)"


def solution_lines(lab: Path) -> tuple[set[str], set[str]]:
    """The lines of the instructor's version of ``lab`` inside its solution and hidden-test regions and its cells
    tagged ``instructor`` that are long enough and appear nowhere in the student version (whitespace runs made one
    space), and the student version's lines of code."""
    nb = read_notebook(lab)
    released = student_version(nb).cells
    student = [line.strip() for cell in released for line in cell.source.splitlines()]
    everything_shown = " ".join(" ".join(student).split())
    secret = set()
    for cell in nb.cells:
        regions = [m.group(0) for m in (*SOLUTION.finditer(cell.source), *HIDDEN.finditer(cell.source))]
        if "instructor" in cell.get("metadata", {}).get("tags", []):
            regions.append(cell.source)
        secret |= {" ".join(line.split()) for region in regions for line in region.splitlines()}
    code = {line.strip() for cell in released if cell.cell_type == "code" for line in cell.source.splitlines()}
    return {line for line in secret if len(line) >= 16 and line not in everything_shown}, code


@pytest.mark.parametrize("lab", LABS, ids=lambda path: path.stem)
def test_no_lab_page_or_download_holds_a_solution(site, lab):
    secret, student = solution_lines(lab)
    assert len(secret) >= 3, f"{lab.name}: too few solution lines to check"
    page = site / "labs" / f"{lab.stem}.html"
    downloads = [p for p in (site / "_downloads").rglob(f"{lab.stem}.*")]
    assert {p.suffix for p in downloads} == {".ipynb", ".py"}, f"{lab.name}: the student version's downloads"
    shown = {"page": text_of(page)}
    for path in downloads:  # the .py as it is, the .ipynb's cells (its JSON escapes quotes)
        cells = read_notebook(path).cells if path.suffix == ".ipynb" else []
        shown[path.name] = "\n".join(cell.source for cell in cells) or path.read_text(encoding="utf-8")
    shown = {where: " ".join(text.split()) for where, text in shown.items()}
    for where, text in shown.items():
        leaked = [line for line in secret if " ".join(line.split()) in text]
        assert not leaked, f"{lab.name}: the {where} holds solution lines: {leaked[:5]}"
    setup = next(line for line in sorted(student) if line.startswith(("import ", "from ")))
    assert setup in shown["page"], "the lab page shows the student version's code (so the check above can see code)"


def test_no_page_holds_nbgrader_markers(site):
    markers = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    for path in site.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".js", ".ipynb", ".py", ".txt"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not any(marker in text for marker in markers), f"{path.relative_to(site)} holds an nbgrader marker"


def test_the_site_has_full_text_search(site):
    assert (site / "search.html").is_file()
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    for stem in ("attent", "electra", "sentinel", "trainer", "checkpoint"):  # words as the English stemmer keeps them
        assert f'"{stem}"' in index, f"the search index lacks {stem!r}"
    assert '"Chapter 0 \\u2014 Attention and the Transformer"' in index, "chapter titles are searchable"
