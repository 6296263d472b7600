"""The HTML the pages share: the document and its stylesheet, tables, figures, and writing a page."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Sequence

from ...formats.base import AtomicFile
from ..numbers import number

CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#59636e;--line:#d0d7de;--panel:#f6f8fa;
--s0:#8c959f;--s1:#0969da;--s2:#d4a72c;--s3:#1a7f37;--s4:#bf3989;--s5:#57606a;--s6:#8250df;
--target:#cf222e;--mean:#1a7f37;--good:#1a7f37;--bad:#cf222e}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#30363d;--panel:#161b22;
--s0:#6e7681;--s1:#4493f8;--s2:#e3b341;--s3:#3fb950;--s4:#db61a2;--s5:#8b949e;--s6:#a371f7;
--target:#ff7b72;--mean:#3fb950;--good:#3fb950;--bad:#ff7b72}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:980px;padding:24px;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{margin:0;font-size:26px}h2{font-size:19px;margin:28px 0 8px}h3{font-size:15px;margin:14px 0 4px}
.sub,.note{color:var(--muted);margin:4px 0}
dl.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin:18px 0}
dl.figures div{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:8px 12px}
dt{color:var(--muted);font-size:13px}dd{margin:0;font-size:20px;font-weight:600;font-variant-numeric:tabular-nums}
figcaption{font-size:17px;font-weight:600;margin:0 0 6px}
figure{margin:24px 0;padding:12px;border:1px solid var(--line);border-radius:8px;background:var(--bg)}
svg{width:100%;height:auto;display:block;font-size:12px}
svg text{fill:var(--fg)}svg .tick{fill:var(--muted)}svg .label{font-size:13px}
.grid{stroke:var(--line);stroke-width:1}.axis{stroke:var(--muted);stroke-width:1}
.bar.s0{fill:var(--s0)}.bar.s1{fill:var(--s1)}.bar.s2{fill:var(--s2)}.bar.s3{fill:var(--s3)}
.bar.s4{fill:var(--s4)}.bar.s5{fill:var(--s5)}.bar.s6{fill:var(--s6)}
#statuses .bar.s0,#ratios .bar.s0,#retention .bar.s0,#assistant .bar.s0{fill:var(--s1)}
#statuses .bar.s1,#ratios .bar.s1,#retention .bar.s1,#assistant .bar.s1{fill:var(--s2)}
#statuses .bar.s2,#ratios .bar.s2,#retention .bar.s2,#assistant .bar.s2{fill:var(--s3)}
.marker{stroke-width:2;stroke-dasharray:6 3}.marker.target{stroke:var(--target)}.marker.mean{stroke:var(--mean)}
svg text.marker-label.target{fill:var(--target);font-weight:600}svg text.marker-label.mean{fill:var(--mean);font-weight:600}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:right}
th:first-child,td:first-child{text-align:left}th{color:var(--muted);font-weight:600}
details{margin-top:8px}summary{cursor:pointer;color:var(--muted)}
ul.defs{columns:2;font-size:13px;color:var(--muted);margin:8px 0;padding-left:18px}
ul.callouts{padding-left:18px}.callouts li.good .verdict{color:var(--good);font-weight:600}
.callouts li.bad .verdict{color:var(--bad);font-weight:600}ol.runs{margin:8px 0;padding-left:0;list-style:none}
"""


def document(title: str, body: list[str], css: str = "") -> str:
    """The page: the shared stylesheet, then a page's own `css`, around `body`."""
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}{css}</style></head><body>"
        + "\n".join(b for b in body if b)
        + "\n<footer class=note>Written by trajcomp; this page fetches nothing and runs no script.</footer></body></html>\n"
    )


def table_html(head: Sequence[str], rows: list[list[str]], escaped: bool = False) -> str:
    def cell(tag: str, text: str) -> str:
        return f"<{tag}>{text if escaped else escape(str(text))}</{tag}>"

    thead = "".join(f"<th scope=col>{escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(cell("td", c) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{thead}</tr></thead><tbody>{body}</tbody></table>"


def cell_html(value: Any) -> str:
    return "-" if value is None else escape(number(value) if isinstance(value, (int, float)) else str(value))


def figure_html(fid: str, title: str, svg: str, table: str, extra: str = "") -> str:
    return (f'<figure id="{fid}" aria-labelledby="{fid}-c"><figcaption id="{fid}-c">{escape(title)}</figcaption>'
            f'{svg}{extra}<details><summary>Table of this figure</summary>{table}</details></figure>')


def missing_html(title: str, why: str) -> str:
    return f"<section><h2>{escape(title)}</h2><p class=note>Not shown: {escape(why)}.</p></section>"


def write_page(path: Path, page: str) -> None:
    """The page, written atomically."""
    with AtomicFile(path) as f:
        f.handle.write(page.encode("utf-8"))
