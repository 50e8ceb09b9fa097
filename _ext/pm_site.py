"""Small fixes to how the site is assembled (a local Sphinx extension).

* Load MathJax on every page: the sidebar's chapter titles carry maths on
  pages whose body has none (bibliography, search, index), and would
  otherwise show raw TeX there.
* Drop repeated inline scripts from the written pages: under Jupyter Book,
  sphinx-thebe's and sphinx-togglebutton's configuration scripts reach
  notebook pages twice, and a second ``const`` declaration is a JavaScript
  error in the reader's console.
"""
import re
from pathlib import Path

_INLINE_SCRIPT = re.compile(r"^\s*<script>[^<]*</script>\s*$")


def _dedupe_inline_scripts(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
        seen, kept = set(), []
        for line in lines:
            if _INLINE_SCRIPT.match(line):
                if line.strip() in seen:
                    continue
                seen.add(line.strip())
            kept.append(line)
        if len(kept) != len(lines):
            page.write_text("".join(kept), encoding="utf-8")


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("build-finished", _dedupe_inline_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
