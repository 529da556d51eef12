"""A latex element's ``html``: TeX rendered to MathML, which browsers draw natively (format §3.3 ``latex``).

OpenMAIC renders ``html`` with KaTeX; a Python server has no KaTeX, so the formula is rendered as MathML with
``latex2mathml`` and wrapped in KaTeX's display class (block, centred), which both canvases size like KaTeX's
own output. TeX that cannot be rendered faithfully (unbalanced braces, unknown commands, nothing at all) is
refused with :class:`FormatInvalid` rather than drawn as raw source.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from latex2mathml.converter import convert

from openmaic.courses.format.problems import FormatInvalid, Problem

__all__ = ["render_latex"]

# latex2mathml keeps a command it does not know as an identifier holding the backslash (`<mi>\foo</mi>`).
_LEFT_OVER_COMMAND = re.compile(r">(\\[A-Za-z]+)<")
_ESCAPED = re.compile(r"\\.", re.S)
_MATHML = "http://www.w3.org/1998/Math/MathML"
_MATHML_TAGS = frozenset({
    "math", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac", "msqrt",
    "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "mstyle", "mpadded",
    "mphantom", "menclose", "merror", "mfenced", "mmultiscripts", "mprescripts", "none", "semantics",
    "annotation", "maligngroup", "malignmark",
})  # fmt: skip
ET.register_namespace("", _MATHML)


def _braces_balance(tex: str) -> bool:
    depth = 0
    for char in _ESCAPED.sub("", tex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def render_latex(tex: str, *, path: str = "/latex") -> str:
    """HTML drawing ``tex`` as a display formula; raises :class:`FormatInvalid` (at ``path``) for TeX it cannot
    render."""
    source = tex.strip()
    if not source:
        raise FormatInvalid([Problem(path, "the formula is empty")])
    if not _braces_balance(source):
        raise FormatInvalid([Problem(path, f"unbalanced braces in TeX {source!r}")])
    try:
        mathml = convert(source, display="block")
    except Exception as error:  # latex2mathml raises many kinds for TeX it cannot parse
        why = f"{type(error).__name__} {error}".strip()
        raise FormatInvalid([Problem(path, f"cannot render TeX {source!r}: {why}")]) from error
    unknown = _LEFT_OVER_COMMAND.search(mathml)
    if unknown is not None:
        raise FormatInvalid([Problem(path, f"unknown TeX command {unknown.group(1)} in {source!r}")])
    checked = _checked(mathml, source, path)
    return f'<span class="katex-display" style="display:block;text-align:center">{checked}</span>'


def _checked(mathml: str, source: str, path: str) -> str:
    """``mathml`` re-serialized after checking it holds MathML only.

    latex2mathml copies ``\\text{…}`` verbatim, markup included; the output goes into a page as HTML, so it is
    parsed, every element must be a MathML element with no event handler or link, and serializing it again
    escapes whatever text it holds.
    """
    try:
        root = ET.fromstring(mathml)
    except ET.ParseError as error:
        raise FormatInvalid([Problem(path, f"TeX {source!r} renders to malformed MathML ({error})")]) from error
    for node in root.iter():
        namespace, _, tag = node.tag.rpartition("}")
        if namespace.lstrip("{") != _MATHML or tag not in _MATHML_TAGS:
            raise FormatInvalid([Problem(path, f"TeX {source!r} holds markup ({tag}); write plain TeX")])
        for name in node.attrib:
            if name.lower().startswith("on") or "href" in name.lower() or "src" in name.lower():
                raise FormatInvalid([Problem(path, f"TeX {source!r} renders a forbidden attribute {name}")])
    return ET.tostring(root, encoding="unicode")
