"""Standalone HTML pages for the tables and figures in `snakemake --report`.

Snakemake 9's report shows an HTML result in a frame and offers every other text format (CSV,
Markdown, LaTeX) only as a download, so each table and figure is also written as one
self-contained page: its title and caption above, the table (or the PNG, embedded as a data URI)
and its notes below. No script, no external style sheet or font: it renders offline.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Sequence

STYLE = """
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #111; background: #fff; margin: 16px 20px; }
h1 { font-size: 17px; margin: 0 0 6px 0; }
h2 { font-size: 14px; margin: 16px 0 5px 0; }
p.caption { font-size: 14px; line-height: 1.45; max-width: 62em; margin: 0 0 12px 0; }
table { border-collapse: collapse; font-size: 13px; border-top: 2px solid #222; border-bottom: 2px solid #222; }
th, td { padding: 3px 7px; text-align: right; white-space: nowrap; }
th { font-weight: 600; }
th.group { border-bottom: 1px solid #888; text-align: center; }
thead tr:last-child th { border-bottom: 1px solid #222; }
.l { text-align: left; }
tr.rule td, tr.rule th { border-top: 1px solid #888; }
tr.block th { text-align: left; background: #f1f1f1; padding-top: 5px; }
tr.reference td { font-style: italic; color: #555; border-top: 1px dashed #999; text-align: left; }
tbody tr:hover td { background: #fbf6e9; }
.notrun { color: #999; }
.n { color: #666; font-size: 85%; }
ul.notes { font-size: 13px; line-height: 1.4; color: #333; max-width: 62em; padding-left: 18px; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
"""


def page(title: str, caption: str, body: str, notes: Sequence[str] = ()) -> str:
    """A complete HTML document: title, caption paragraph, `body` (already HTML) and notes.

    `title`, `caption` and `notes` are plain text and are escaped here."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    if caption:
        parts.append(f'<p class="caption">{escape(caption)}</p>')
    parts.append(body)
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{escape(note)}</li>" for note in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def png_image(png: bytes, alt: str) -> str:
    """An <img> holding the PNG bytes as a data URI."""
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def simple_table(header: Sequence[str], rows: Sequence[Sequence[str]], left_columns: int = 1, rules_before: Sequence[int] = ()) -> str:
    """A one-header-row table of plain-text cells; the first `left_columns` columns align left and
    a rule is drawn above each row index in `rules_before`."""

    def cell(tag: str, index: int, text: str) -> str:
        align = ' class="l"' if index < left_columns else ""
        return f"<{tag}{align}>{escape(text)}</{tag}>"

    lines = ["<table>", "<thead><tr>" + "".join(cell("th", i, text) for i, text in enumerate(header)) + "</tr></thead>", "<tbody>"]
    for number, row in enumerate(rows):
        css = ' class="rule"' if number in rules_before else ""
        lines.append(f"<tr{css}>" + "".join(cell("td", i, text) for i, text in enumerate(row)) + "</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)
