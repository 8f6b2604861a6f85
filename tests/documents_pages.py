"""Pages for the documents tests: known main text wrapped in the boilerplate real
sites wrap theirs in (navigation, a cookie banner, related links, a footer)."""

from __future__ import annotations

import json

BOILERPLATE = [
    "Subscribe to our newsletter",
    "We use cookies to improve your experience",
    "Accept all cookies",
    "Related articles",
    "Ten tricks nobody tells you",
    "Privacy policy",
    "All rights reserved",
    "Home",
    "Shop",
]

ENGLISH = [
    "The lighthouse keeper climbed the spiral stairs every evening before sunset, "
    "carrying a can of oil and a cloth to polish the great lens.",
    "For more than forty years the light had never failed, even on the night of the "
    "storm that tore the roof from the boathouse and flooded the lower rooms.",
    "Ships passing the headland relied on its beam to find the narrow channel between "
    "the rocks, and their captains sent letters of thanks every winter.",
    "When the light was finally automated, the keeper moved to the village and kept "
    "the old logbooks, which now fill three shelves of the local museum.",
]
GERMAN = [
    "Brot gehört zu den ältesten Nahrungsmitteln der Menschheit. Schon vor mehr als "
    "zehntausend Jahren backten Menschen flache Fladen aus zerstoßenem Getreide.",
    "Der Sauerteig entstand vermutlich zufällig, als ein Teig länger stehen blieb und "
    "wilde Hefen ihn aufgehen ließen. Die Ägypter nutzten diese Entdeckung systematisch.",
    "Heute gibt es in Deutschland mehr als dreitausend anerkannte Brotsorten, und das "
    "Handwerk der Bäcker wurde als immaterielles Kulturerbe anerkannt.",
]
JAPANESE = [
    "富士山は日本で最も高い山であり、その美しい姿は古くから多くの芸術家に描かれてきました。",
    "毎年夏になると、多くの登山者が山頂を目指して夜明け前から歩き始め、ご来光を待ちます。",
    "二千十三年には世界文化遺産に登録され、国内外からの観光客がさらに増えました。",
]


def page(title: str, paragraphs: list[str], *, lang: str = "en", extra: str = "",
         head: str = "") -> str:  # fmt: skip
    """An article page; ``lang`` as the page declares it (often a template's default)."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs[:2])
    body += f"<h2>{title} today</h2>" + "".join(f"<p>{p}</p>" for p in paragraphs[2:])
    return f"""<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">
<title>{title} | Example Magazine</title>
<meta name="description" content="All about {title}">
<link rel="canonical" href="/articles/{title.lower().replace(" ", "-")}">
{head}</head><body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/shop">Shop</a></li>
<li><a href="/newsletter">Subscribe to our newsletter</a></li></ul></nav></header>
<div class="cookie-banner" id="cookie-consent"><p>We use cookies to improve your experience.</p>
<button>Accept all cookies</button></div>
<main><article><h1>{title}</h1>{body}{extra}</article></main>
<aside class="related"><h3>Related articles</h3><ul>
<li><a href="/a">Ten tricks nobody tells you</a></li><li><a href="/b">The best of the week</a></li>
</ul></aside>
<footer><p><a href="/privacy">Privacy policy</a> · © 2026 Example Magazine. All rights reserved.</p>
</footer></body></html>"""


def json_ld(**fields: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(fields)}</script>'


STRUCTURE = """<ul><li>oil can</li><li>polishing cloth</li></ul>
<table><tr><th>Year</th><th>Keeper</th></tr><tr><td>1950</td><td>Ada Pike</td></tr></table>
<pre><code>light.on()</code></pre>
<p>See the <a href="/museum">museum page</a> for the logbooks.</p>"""


def site_pages() -> dict[str, str]:
    """A small site: its index links to an English, a German (declared "en", as
    a template would) and a Japanese article, a PDF and a DOCX (written apart)."""
    english = page("The Lighthouse", ENGLISH, extra=STRUCTURE,
                   head=json_ld(**{"@context": "https://schema.org", "@type": "Article",
                                   "datePublished": "2024-03-01",
                                   "dateModified": "2024-04-02"}))  # fmt: skip
    links = "".join(f'<p><a href="/{name}.html">{name}</a></p>' for name in ("en", "de", "ja"))
    links += '<p><a href="/report.pdf">report</a> <a href="/notes.docx">notes</a></p>'
    return {
        "index.html": f"<html><head><title>Index</title></head><body>{links}</body></html>",
        "en.html": english,
        "de.html": page("Brot", GERMAN, lang="en"),
        "ja.html": page("富士山", JAPANESE, lang="en"),
    }


def token_f1(found: str, expected: str) -> float:
    """Token F1 of ``found`` against ``expected`` (words; a CJK character each)."""
    from collections import Counter

    from extensions.documents.chunks import TOKEN

    def tokens(text: str) -> Counter[str]:
        return Counter(t.lower() for t in TOKEN.findall(text) if t.isalnum())

    a, b = tokens(found), tokens(expected)
    common = sum((a & b).values())
    if not common:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


REPORT = [
    "The annual report of the harbour describes the ships that called at the port.",
    "Cargo volumes rose by a tenth, led by timber and grain from the northern farms.",
]


def a_pdf(paragraphs: list[str] = REPORT, password: str = "") -> bytes:
    """A one-page PDF of ``paragraphs`` in Helvetica, titled "Harbour report",
    written object by object (the format's own simplest file); encrypted with
    ``password`` if one is given (pypdf)."""
    import io

    def escaped(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    lines, y = [], 780
    for paragraph in paragraphs:
        line = ""
        for word in paragraph.split():
            if len(line) + len(word) > 80:
                lines.append((y, line))
                y, line = y - 16, ""
            line = f"{line} {word}".strip()
        lines.append((y, line))
        y -= 28
    text = " ".join(f"1 0 0 1 50 {at} Tm ({escaped(t)}) Tj" for at, t in lines)
    stream = f"BT /F1 11 Tf {text} ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
        "<< /Title (Harbour report) >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 6 0 R >>\n"
              f"startxref\n{xref}\n%%EOF\n".encode())  # fmt: skip
    if not password:
        return out.getvalue()
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(out.getvalue())))
    writer.encrypt(password)
    encrypted = io.BytesIO()
    writer.write(encrypted)
    return encrypted.getvalue()


def a_docx(paragraphs: list[str] = REPORT) -> bytes:
    """A DOCX (python-docx): a title, a heading, the paragraphs, a list and a table."""
    import io

    import docx

    made = docx.Document()
    made.core_properties.title = "Harbour notes"
    made.add_heading("Harbour notes", level=1)
    for paragraph in paragraphs:
        made.add_paragraph(paragraph)
    made.add_heading("Cargo", level=2)
    made.add_paragraph("timber", style="List Bullet")
    table = made.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Cargo", "Tons"), ("grain", "120")], strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()
