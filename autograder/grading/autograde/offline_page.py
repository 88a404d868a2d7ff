"""Feedback pages that open on their own, offline (issue 48, item 7).

A page returned through the LMS is opened with nothing beside it. Two steps, on the page after
it was sanitised (``feedback_html.clean_page``, in the grading process), make it whole:

- **maths as MathML**, which browsers render with no script: each ``$...$``, ``$$...$$``,
  ``\\(...\\)``, ``\\[...\\]`` and ``\\begin{env}...\\end{env}`` of the text outside ``pre``,
  ``code`` and ``textarea`` goes through ``latex2mathml`` (:func:`mathml`). The converter
  copies some input through (``\\text{<script>}`` comes out as a ``<script>`` element), so its
  output is parsed as XML and written anew from :data:`MATHML_TAGS` and
  :data:`MATHML_ATTRIBUTES`, text escaped; anything else leaves the LaTeX text (escaped);
- **figures embedded**: ``<img src="figures/<name>">`` of a chapter diagram
  (``autograder/diagrams.py``, drawn by the course's code) becomes a ``data:image/svg+xml``
  URI (an SVG in ``<img>`` runs nothing), up to :data:`MAX_FIGURE_BYTES`.

>>> finish('<p>$x^2$ and <code>$y$</code></p>', {})
'<p><math display="inline"><mrow><msup><mi>x</mi><mn>2</mn></msup></mrow></math> and \
<code>$y$</code></p>'
>>> finish('<p>$\\\\text{<script>}$</p>'.replace('<script>', '&lt;script&gt;'), {})
'<p>$\\\\text{&lt;script&gt;}$</p>'
"""

from __future__ import annotations

import base64
import html
import re
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/1998/Math/MathML}"
MATHML_TAGS = frozenset({
    "math", "menclose", "merror", "mfrac", "mi", "mmultiscripts", "mn", "mo", "mover",
    "mpadded", "mphantom", "mprescripts", "mroot", "mrow", "ms", "mspace", "msqrt", "mstyle",
    "msub", "msubsup", "msup", "mtable", "mtd", "mtext", "mtr", "munder", "munderover", "none",
})
MATHML_ATTRIBUTES = frozenset({
    "accent", "accentunder", "close", "columnalign", "columnlines", "columnspacing", "depth",
    "display", "displaystyle", "fence", "form", "frame", "height", "largeop", "linethickness",
    "lspace", "mathbackground", "mathcolor", "mathsize", "mathvariant", "maxsize", "minsize",
    "movablelimits", "notation", "open", "rowalign", "rowlines", "rowspacing", "rspace",
    "scriptlevel", "separator", "stretchy", "symmetric", "voffset", "width",
})
# an attribute value: words, numbers, lengths, colours (no quote, colon, parenthesis, slash)
_VALUE = re.compile(r"[\w.#%+\- ]{0,64}\Z")
MAX_FIGURE_BYTES = 256 * 1024
SKIP = frozenset({"pre", "code", "textarea", "script", "style", "noscript", "math"})

# a tag of the sanitised body (bleach quotes every attribute value with ")
_TAG = re.compile(r'<(/?)([A-Za-z][\w:-]*)((?:[^>"]|"[^"]*")*)>')
_MATH = re.compile(
    r"(?<!\\)\$\$(?P<dd>.+?)(?<!\\)\$\$"
    r"|\\\[(?P<bb>.+?)\\\]"
    r"|(?P<env>\\begin\{(?P<name>[A-Za-z]+\*?)\}.+?\\end\{(?P=name)\})"
    r"|\\\((?P<pp>.+?)\\\)"
    r"|(?<![\\$])\$(?P<d>[^$]+?)(?<!\\)\$",
    re.S)
_FIGURE_SRC = re.compile(r'(\ssrc=")(?:\./)?figures/([\w.-]+\.svg)(")')


def mathml(latex: str, display: bool) -> str | None:
    """``latex`` as MathML made of :data:`MATHML_TAGS` only (None where it cannot be).

    >>> mathml("a_1", False)
    '<math display="inline"><mrow><msub><mi>a</mi><mn>1</mn></msub></mrow></math>'
    >>> mathml("\\\\text{<script>x()</script>}", False) is None  # an element not listed
    True
    >>> mathml("\\\\href{javascript:x()}{a}", True)  # an attribute not listed: dropped
    '<math display="block"><mrow><mrow><mrow><mi>a</mi></mrow></mrow></mrow></math>'
    """
    from latex2mathml.converter import convert

    try:
        root = ET.fromstring(convert(latex, display="block" if display else "inline"))
    except Exception:  # noqa: BLE001 - what the converter cannot do stays LaTeX text
        return None
    if root.tag != NS + "math":
        return None
    out: list[str] = []
    return "".join(out) if _write(root, out) else None


def _write(el, out: list[str]) -> bool:
    if not el.tag.startswith(NS) or el.tag[len(NS):] not in MATHML_TAGS:
        return False
    tag = el.tag[len(NS):]
    attrs = "".join(f' {k}="{v}"' for k, v in sorted(el.attrib.items())
                    if k in MATHML_ATTRIBUTES and _VALUE.match(v))
    out.append(f"<{tag}{attrs}>" + html.escape(el.text or "", quote=False))
    for child in el:
        if not _write(child, out):
            return False
        out.append(html.escape(child.tail or "", quote=False))
    out.append(f"</{tag}>")
    return True


def _maths(text: str) -> str:
    """One text node of the page (HTML-escaped) with its formulas as MathML."""
    raw = html.unescape(text)
    if "$" not in raw and "\\" not in raw:
        return text
    parts, pos, changed = [], 0, "\\$" in raw
    for m in _MATH.finditer(raw):
        inline = m["d"] if m["d"] is not None else m["pp"]
        body = inline if inline is not None else (m["dd"] or m["bb"] or m["env"])
        converted = mathml(body, inline is None) if body and body.strip() else None
        if converted is None:
            continue
        parts += [_escape_text(raw[pos:m.start()]), converted]
        pos, changed = m.end(), True
    if not changed:
        return text
    return "".join(parts) + _escape_text(raw[pos:])


def _escape_text(s: str) -> str:
    return html.escape(s.replace("\\$", "$"), quote=False)


def _figure_uri(svg: str) -> str | None:
    data = svg.encode("utf-8")
    if len(data) > MAX_FIGURE_BYTES:
        return None
    return "data:image/svg+xml;base64," + base64.b64encode(data).decode("ascii")


def finish(body: str, figures: dict[str, str]) -> str:
    """A sanitised page body with its maths as MathML and ``figures`` (``{file name: SVG
    text}``) embedded where an ``<img>`` shows ``figures/<name>``."""
    uris = {name: _figure_uri(svg) for name, svg in figures.items()}
    out, pos, skip = [], 0, []
    for m in _TAG.finditer(body):
        text = body[pos:m.start()]
        out.append(text if skip else _maths(text))
        closing, name, tag = m[1], m[2].lower(), m[0]
        if name in SKIP and not tag.endswith("/>"):
            if not closing:
                skip.append(name)
            elif name in skip:
                del skip[len(skip) - 1 - skip[::-1].index(name):]
        if name == "img" and not closing:
            tag = _FIGURE_SRC.sub(lambda f: f[1] + (uris.get(f[2]) or f"figures/{f[2]}") + f[3],
                                  tag)
        out.append(tag)
        pos = m.end()
    tail = body[pos:]
    out.append(tail if skip else _maths(tail))
    return "".join(out)


def warm_up() -> None:
    """The converter's tables and this module's expressions, built before the warm process
    forks (``feedback_html.warm_up``)."""
    finish('<p>$x^2$ $$\\frac{a}{b}$$ <img src="figures/a.svg"></p>', {"a.svg": "<svg/>"})
