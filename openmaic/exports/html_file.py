"""The classroom as one HTML file that plays offline: the player's stylesheets and modules inlined, the classroom
document embedded (``<script type="application/json" id="classroom-data">``), and its pictures, videos, posters
and narration embedded as data URLs (``id="classroom-assets"``, asset id -> data URL; the player looks asset ids
up there before the server). Media the export could not carry keep no address (they show as missing, never as a
request to a server that is not there).

The player's ES modules (``openmaic/web/classroom/*.js``) are joined into one inline module: each becomes a
function scope that returns its exports, and each ``import { a, b } from "./x.js"`` reads them from the module it
names, in dependency order. The modules keep to that one import form and to ``export function|const|class`` and
``export { … }`` so this stays a plain text transformation.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from openmaic.exports.document import AssetBytes, actions_of, asset_id_of, canvas_of, scenes_of

__all__ = ["bundle_modules", "build_html"]

_IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w-]+)\.js";\n', re.M)
_EXPORT_DECL = re.compile(r"^export (?=(?:async )?function\*? |const |let |class )", re.M)
_EXPORT_NAME = re.compile(r"^export (?:async )?(?:function\*?|const|let|class) ([A-Za-z_$][\w$]*)", re.M)
_EXPORT_LIST = re.compile(r"^export \{([^}]*)\};\n?", re.M)


def _modules() -> dict[str, str]:
    folder = resources.files("openmaic.web").joinpath("classroom")
    return {p.name[:-3]: p.read_text("utf-8") for p in folder.iterdir() if p.name.endswith(".js")}


def bundle_modules(sources: Mapping[str, str], entry: str = "main") -> str:
    """One module's text holding ``entry`` and every module it imports (see the module docstring)."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise ValueError(f"the player's modules import each other in a cycle: {' -> '.join(path + (name,))}")
        if name not in sources:
            raise ValueError(f"the player's module {path[-1] if path else entry!r} imports a missing ./{name}.js")
        for _, dep in _IMPORT.findall(sources[name]):
            visit(dep, path + (name,))
        order.append(name)

    visit(entry, ())
    parts = []
    for name in order:
        text = sources[name]
        names = _EXPORT_NAME.findall(text)
        for listed in _EXPORT_LIST.findall(text):
            names += [n.strip() for n in listed.split(",") if n.strip()]
        text = _IMPORT.sub(lambda m: f"const {{{m.group(1)}}} = __module_{m.group(2).replace('-', '_')};\n", text)
        text = _EXPORT_LIST.sub("", _EXPORT_DECL.sub("", text))
        parts.append(f"const __module_{name.replace('-', '_')} = (() => {{\n{text}\nreturn {{ {', '.join(names)} }};\n}})();\n")
    return "\n".join(parts)


def _script_json(value: Any) -> str:
    # Inside <script>, "</" would end the element; JSON's \u escapes keep the text identical once parsed.
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace("\u2028", "\\u2028") \
        .replace("\u2029", "\\u2029")


def _offline(classroom: Mapping[str, Any], assets: AssetBytes) -> dict[str, Any]:
    """The classroom as the offline page reads it: nothing being generated, and media it cannot carry dropped."""
    doc = json.loads(json.dumps(classroom))
    doc["generatingRunId"] = None
    doc["pendingScenes"] = []
    for scene in scenes_of(doc):
        for el in (canvas_of(scene) or {}).get("elements") or []:
            if not isinstance(el, dict):
                continue
            for slot in ("src", "poster"):
                asset = asset_id_of(el.get(slot))
                if asset and asset not in assets:
                    el.pop(slot)
        for action in actions_of(scene):
            if action.get("type") == "speech" and action.get("audioId") not in assets:
                action.pop("audioId", None)
    return doc


def build_html(classroom: Mapping[str, Any], assets: AssetBytes) -> bytes:
    """The offline page of ``classroom`` (see the module docstring)."""
    web = resources.files("openmaic.web")
    styles = web.joinpath("styles.css").read_text("utf-8") + web.joinpath("classroom.css").read_text("utf-8")
    urls = {k: f"data:{kind.split(';')[0]};base64,{base64.b64encode(data).decode()}" for k, (data, kind) in assets.items()}
    doc = _offline(classroom, assets)
    title = str((doc.get("stage") or {}).get("name") or doc.get("title") or "Classroom")
    page = web.joinpath("classroom.html").read_text("utf-8")
    # Neither the styles nor the modules hold "</style" or "</script"; escaping keeps it so if they ever do.
    css = styles.replace("</", "<\\/")
    code = bundle_modules(_modules()).replace("</script", "<\\/script")
    head = (f"<style>{css}</style>\n"
            f'<script type="application/json" id="classroom-data">{_script_json(doc)}</script>\n'
            f'<script type="application/json" id="classroom-assets">{_script_json(urls)}</script>\n'
            f'<script type="module">{code}</script>\n')
    page = re.sub(r'\s*<link rel="stylesheet"[^>]*>', "", page)
    page = re.sub(r'\s*<script type="module" src="[^"]*"></script>', "", page)
    page = page.replace("<title>Classroom · openmaic</title>",
                        f"<title>{title.replace('&', '&amp;').replace('<', '&lt;')} · openmaic</title>")
    return page.replace("</head>", head + "</head>", 1).encode()
