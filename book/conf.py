"""Sphinx configuration of the course book. Build it with ``python tools/book.py`` (see its docstring): that command
gathers the pages (this folder's Markdown, the executed chapter notebooks, each lab's student version, the
benchmarks) into a source folder under the build folder and runs Sphinx on it with this configuration.

Everything the site shows ships with it: the theme's assets, the search index and MathJax (``sphinx-mathjax-offline``
copies MathJax 3 into ``_static/mathjax``); nothing is fetched from a CDN at build or view time, and the notebooks
are rendered from their committed outputs, never re-executed."""

import importlib

project = "minilm"
author = "the minilm authors"
copyright = "the minilm authors, MIT licence"
html_title = "minilm: a course on pretrained language models"

extensions = ["myst_nb"]  # Markdown (MyST) pages and notebooks

# The notebooks are shown as committed: executed, with their outputs. The site never runs a kernel.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # no widget manager from a CDN: tools/book.py replaces explorers' widgets by a note
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_dmath_double_inline = True  # $$...$$ inside a paragraph is display math, as in JupyterLab
myst_heading_anchors = 3
smartquotes = False  # the text as the notebooks have it (and as tests/test_book.py compares it)
suppress_warnings = ["myst.header"]  # a notebook's sections may start at ### under its # title

exclude_patterns = ["_student/**", "_repo/**", "**.ipynb_checkpoints"]
master_doc = "index"

html_theme = "sphinx_book_theme"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,  # it offers the page's source; the lab pages offer the student notebook instead
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_copy_source = False  # no _sources/ copies: a page's source is its notebook in the repository
html_show_sourcelink = False
html_last_updated_fmt = None


def setup(app):
    """MathJax from the site itself: sphinx-mathjax-offline (whose import name has hyphens) points ``mathjax_path``
    at ``_static/mathjax/tex-chtml.js`` and copies MathJax 3 there once the build has finished. Set up here rather
    than listed as an extension, which it does not declare safe for Sphinx's parallel reading (it reads nothing)."""
    importlib.import_module("sphinx-mathjax-offline").setup(app)
