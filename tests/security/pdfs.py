"""PDFs built byte by byte for the extraction tests: ordinary ones, and hostile ones a few kilobytes long."""

from __future__ import annotations

import re
import zlib


def pdf(content: bytes, pages: int = 1, *, compress: bool = True) -> bytes:
    """A PDF of ``pages`` pages that all show one content stream ``content`` (Helvetica as F1)."""
    data = zlib.compress(content, 9) if compress else content
    flate = b" /Filter /FlateDecode" if compress else b""
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d%s >>\nstream\n" % (len(data), flate) + data + b"\nendstream",
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents 4 0 R >>"] * pages
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_pdf(text: str, pages: int = 1) -> bytes:
    """An ordinary PDF: ``text`` on every page."""
    return pdf(b"BT /F1 12 Tf 72 712 Td (%s) Tj ET\n" % text.encode("latin-1"), pages)


def slow_pdf(pages: int = 50, lines: int = 100_000) -> bytes:
    """About 100 KB that take pypdf minutes of CPU: every page walks one shared stream of many text operators."""
    return pdf((b"BT /F1 12 Tf 72 712 Td (" + b"A" * 200 + b") Tj ET\n") * lines, pages)


def bloating_pdf(mb: int = 20, pages: int = 2) -> bytes:
    """About 20 KB that grow pypdf by hundreds of MB: one string of ``mb`` MiB, shown on every page."""
    return pdf(b"BT /F1 12 Tf 72 712 Td (" + b"A" * (mb << 20) + b") Tj ET\n", pages)


def inflating_pdf(mb: int = 70) -> bytes:
    """About 70 KB whose one stream inflates to ``mb`` MiB of blanks at once."""
    return pdf(b" " * (mb << 20))


def broken_xref_pdf(pages: int = 300) -> bytes:
    """A PDF whose cross-reference table points 3 bytes past every object: pypdf recovers, warning per object."""
    good = text_pdf("Hi", pages)
    return re.sub(rb"(\d{10}) 00000 n ", lambda m: b"%010d 00000 n " % (int(m.group(1)) + 3), good)
