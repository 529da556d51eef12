"""The interactive answer: one complete, self-contained HTML page meeting COURSE-FORMAT §3.5.

Three widgets: a slider simulation (the subject's model when the demo knows one, else the outline's variables
feeding a simple combined score), a flowchart revealed step by step, and a true-or-false quiz game. Each page
embeds its ``widget-config``, listens for the four widget messages (set state, highlight, annotate, reveal),
gives its controls stable ids (``#<variable>-slider``, ``#result-display``, ``#reset-btn``, ``#next-btn``,
``[data-step-id="step-1"]`` …), resets to its exact initial state, and loads nothing from the network: the
classroom runs it in a sandbox with no network access, so there are no external scripts, styles or fonts.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from openmaic.models.demo_course.brief import scene_of, seed, strings, text_of
from openmaic.models.demo_course.knowledge import Model, Variable, find_model
from openmaic.models.demo_course.language import EN, ZH, course_language, pick
from openmaic.models.demo_course.quiz import _WRONG
from openmaic.models.demo_course.subjects import find_subject, pick_lang
from openmaic.models.demo_course.topic import topic_phrase

_STYLE = """
*{box-sizing:border-box}
html,body{margin:0;height:100%}
body{font-family:system-ui,-apple-system,"Segoe UI","PingFang SC","Microsoft YaHei",sans-serif;background:#f8fafc;
color:#1e293b;padding:20px;line-height:1.5}
h1{font-size:clamp(20px,4vw,28px);margin:0 0 6px}
p.lead{margin:0 0 16px;color:#475569}
.panel{background:#fff;border-radius:12px;box-shadow:0 1px 4px rgba(15,23,42,.12);padding:16px;margin-bottom:14px}
.row{margin:10px 0}
label{display:block;font-weight:600}
input[type=range]{width:100%;accent-color:#2563eb}
#result-display{font-size:clamp(22px,5vw,32px);font-weight:700;color:#2563eb}
.bar{height:14px;background:#e2e8f0;border-radius:7px;overflow:hidden}
.bar>div{height:100%;background:linear-gradient(90deg,#2563eb,#7c3aed);width:0;transition:width .3s}
button{font:inherit;padding:8px 16px;border-radius:8px;border:1px solid #cbd5e1;background:#fff;cursor:pointer;margin:4px 6px 4px 0}
button.primary{background:#2563eb;color:#fff;border-color:#2563eb}
.hidden{display:none}
.step{border-left:5px solid #2563eb;background:#fff;border-radius:10px;padding:10px 14px;margin:10px 0;
box-shadow:0 1px 3px rgba(15,23,42,.1)}
.step.pending{opacity:.25;filter:grayscale(1)}
.arrow{text-align:center;color:#94a3b8;font-size:20px;margin:-4px 0}
.choices button{min-width:110px}
.feedback{min-height:1.5em;font-weight:600}
.teacher-highlight{outline:3px solid #8b5cf6 !important;outline-offset:3px;transition:outline .2s}
.teacher-annotation{position:absolute;z-index:10;max-width:260px;background:#1e293b;color:#fff;padding:6px 10px;
border-radius:8px;font-size:14px;box-shadow:0 2px 8px rgba(0,0,0,.25)}
@media (max-width:600px){body{padding:12px}.panel{padding:12px}}
"""

# The four widget messages; ``applyState`` is each widget's own. A target may be a selector or a bare id.
_LISTENER = """
function findTarget(t){if(!t)return null;var el=null;try{el=document.querySelector(t);}catch(e){}
if(!el&&t.charAt(0)!=='#')el=document.getElementById(t);return el;}
window.addEventListener('message',function(ev){var d=ev.data||{};if(typeof d!=='object')return;
var el=findTarget(d.target);
if(d.type==='SET_WIDGET_STATE'&&d.state&&typeof d.state==='object'){applyState(d.state);}
else if(d.type==='HIGHLIGHT_ELEMENT'&&el){el.classList.add('teacher-highlight');el.scrollIntoView({block:'nearest'});
setTimeout(function(){el.classList.remove('teacher-highlight');},3000);}
else if(d.type==='ANNOTATE_ELEMENT'&&el&&d.content){var n=document.createElement('div');n.className='teacher-annotation';
n.textContent=d.content;var b=el.getBoundingClientRect();n.style.left=(b.left+window.scrollX)+'px';
n.style.top=(b.bottom+window.scrollY+6)+'px';document.body.appendChild(n);setTimeout(function(){n.remove();},4000);}
else if(d.type==='REVEAL_ELEMENT'&&el){el.classList.remove('hidden');el.classList.remove('pending');
el.style.display='';}});
"""


def _page(lang: str, title: str, lead: str, body: str, config: dict[str, Any], script: str) -> str:
    cfg = json.dumps(config, ensure_ascii=False).replace("</", "<\\/")
    # The page names no maths renderer on purpose (it shows formulas as plain text): it must run offline.
    return (
        f'<!DOCTYPE html>\n<html lang="{"zh-CN" if lang == ZH else "en"}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f'<h1>{html.escape(title)}</h1>\n<p class="lead">{html.escape(lead)}</p>\n{body}\n'
        f'<script type="application/json" id="widget-config">{cfg}</script>\n'
        f"<script>\n{script}\n{_LISTENER}\n</script>\n</body>\n</html>\n"
    )


def _slug(name: str, i: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or f"var{i + 1}"


def _simulation(lang: str, scene: dict[str, Any], model: Model | None, topic: str) -> tuple[str, dict[str, Any], str]:
    if model is not None:
        variables = list(model.variables)
        expr, result, unit = model.js, (model.result[1] if lang == ZH else model.result[0]), model.unit
    else:
        outline = scene.get("widgetOutline") if isinstance(scene.get("widgetOutline"), dict) else {}
        names = strings(outline.get("keyVariables"))[:3] or [pick(lang, "amount", "数量"), pick(lang, "time", "时间")]
        variables = [Variable(_slug(n, i), (n, n), 0, 10, 5, 1) for i, n in enumerate(names)]
        expr = " * ".join(v.name.replace("-", "_") for v in variables)
        result, unit = pick(lang, "Combined effect", "综合效果"), ""
    js_names = [v.name.replace("-", "_") for v in variables]
    rows = []
    for v in variables:
        label = v.label[1] if lang == ZH else v.label[0]
        rows.append(
            f'<div class="row"><label for="{v.name}-slider">{html.escape(label)}: '
            f'<span id="{v.name}-value">{v.default:g}</span> {html.escape(v.unit)}</label>'
            f'<input id="{v.name}-slider" type="range" min="{v.low:g}" max="{v.high:g}" step="{v.step:g}" '
            f'value="{v.default:g}"></div>'
        )
    defaults = {v.name: v.default for v in variables}
    top = 1.0
    if model is not None:
        top = max(abs(float(model.py(**{**defaults, **{v.name: v.high for v in variables}}))), 1e-9)
    else:
        top = float(10 ** len(variables))
    insight = pick(
        lang,
        "Notice: change one slider at a time and watch how the result follows.",
        "注意：每次只移动一个滑块，观察结果如何随之变化。",
    )
    if model is not None:
        insight = pick(lang, f"The rule behind it: {model.facts[0][0]}.", f"背后的规律：{model.facts[0][1]}。")
    body = (
        f'<div class="panel" id="controls">{"".join(rows)}</div>\n'
        f'<div class="panel"><div>{html.escape(result)}:</div><div id="result-display"></div>'
        f'<div class="bar" id="result-bar"><div id="result-fill"></div></div></div>\n'
        f'<div class="panel hidden" id="insight-card">{html.escape(insight)}</div>\n'
        f'<button id="reset-btn">{pick(lang, "Reset", "重置")}</button>'
    )
    config = {
        "type": "simulation",
        "concept": topic,
        "description": text_of(scene.get("description"), topic),
        "variables": [
            {"name": v.name, "label": v.label[1] if lang == ZH else v.label[0], "min": v.low, "max": v.high,
             "default": v.default, "step": v.step, **({"unit": v.unit} if v.unit else {})}
            for v in variables
        ],
    }  # fmt: skip
    script = (
        f"var NAMES={json.dumps([v.name for v in variables])};var DEFAULTS={json.dumps(defaults)};"
        f"var UNIT={json.dumps(unit)};var TOP={top!r};\n"
        "function val(n){return parseFloat(document.getElementById(n+'-slider').value);}\n"
        f"function compute(){{var {', '.join(f'{j}=val({json.dumps(v.name)})' for j, v in zip(js_names, variables, strict=True))};"
        f"return {expr.replace('-', '_') if model is None else expr};}}\n"
        "function update(){NAMES.forEach(function(n){document.getElementById(n+'-value').textContent=val(n);});"
        "var r=compute();var shown=Math.abs(r)>=100?Math.round(r):Math.round(r*100)/100;"
        "document.getElementById('result-display').textContent=shown+(UNIT?' '+UNIT:'');"
        "document.getElementById('result-fill').style.width=Math.max(0,Math.min(100,100*r/TOP))+'%';}\n"
        "function applyState(s){Object.keys(s).forEach(function(k){var el=document.getElementById(k+'-slider');"
        "if(el&&typeof s[k]==='number')el.value=s[k];});update();}\n"
        "NAMES.forEach(function(n){document.getElementById(n+'-slider').addEventListener('input',update);});\n"
        "document.getElementById('reset-btn').addEventListener('click',function(){applyState(DEFAULTS);"
        "document.getElementById('insight-card').classList.add('hidden');});\nupdate();"
    )
    return body, config, script


def _diagram(lang: str, scene: dict[str, Any], topic: str) -> tuple[str, dict[str, Any], str]:
    outline = scene.get("widgetOutline") if isinstance(scene.get("widgetOutline"), dict) else {}
    labels = [text_of(n.get("label")) for n in outline.get("nodes") or [] if isinstance(n, dict)]
    labels = [lab for lab in labels if lab] or strings(scene.get("keyPoints")) or [topic]
    labels = labels[:6]
    steps = []
    for i, label in enumerate(labels):
        if i:
            steps.append('<div class="arrow" aria-hidden="true">▼</div>')
        steps.append(
            f'<div class="step pending" id="node-{i + 1}" data-step-id="step-{i + 1}">'
            f"<strong>{i + 1}.</strong> {html.escape(label)}</div>"
        )
    body = (
        f'<div class="panel"><div id="result-display"></div></div>\n<div id="flow">{"".join(steps)}</div>\n'
        f'<button class="primary" id="next-btn" data-action="next">{pick(lang, "Next step", "下一步")}</button>'
        f'<button id="reset-btn" data-action="reset">{pick(lang, "Reset", "重置")}</button>'
    )
    config = {
        "type": "diagram",
        "diagramType": "flowchart",
        "description": text_of(scene.get("description"), topic),
        "nodes": [
            {"id": f"node-{i + 1}", "label": lab, "type": "start" if i == 0 else "end" if i == len(labels) - 1 else "default"}
            for i, lab in enumerate(labels)
        ],
        "edges": [{"id": f"edge-{i + 1}", "from": f"node-{i + 1}", "to": f"node-{i + 2}"} for i in range(len(labels) - 1)],
        "revealOrder": [f"node-{i + 1}" for i in range(len(labels))],
    }  # fmt: skip
    done = pick(lang, "revealed", "已展开")
    script = (
        f"var TOTAL={len(labels)};var shown=0;var DONE={json.dumps(done)};\n"
        "function render(){for(var i=1;i<=TOTAL;i++){document.getElementById('node-'+i).classList.toggle('pending',i>shown);}"
        "document.getElementById('result-display').textContent=shown+' / '+TOTAL+' '+DONE;"
        "document.getElementById('next-btn').disabled=shown>=TOTAL;}\n"
        "function applyState(s){var n=s.revealed!==undefined?s.revealed:s.step;"
        "if(typeof n==='number'){shown=Math.max(0,Math.min(TOTAL,Math.round(n)));render();}}\n"
        "document.getElementById('next-btn').addEventListener('click',function(){if(shown<TOTAL){shown++;render();}});\n"
        "document.getElementById('reset-btn').addEventListener('click',function(){shown=0;render();});\nrender();"
    )
    return body, config, script


def outline_concept(scene: dict[str, Any]) -> str:
    outline = scene.get("widgetOutline") if isinstance(scene.get("widgetOutline"), dict) else {}
    return " ".join(str(v) for v in outline.values() if isinstance(v, str)) + " " + text_of(scene.get("title"))


def _game(lang: str, scene: dict[str, Any], topic: str, s: int) -> tuple[str, dict[str, Any], str]:
    points = strings(scene.get("keyPoints"))[:3] or [topic]
    subject = find_subject(topic, text_of(outline_concept(scene)))
    # False statements: the subject's misconceptions first, general ones after.
    wrong = (pick_lang(subject.myths, lang == ZH) if subject else []) + _WRONG[lang]
    if subject is not None and subject.ideas:
        points = pick_lang(subject.ideas, lang == ZH)
    statements: list[tuple[str, bool]] = []
    for i, p in enumerate(points):
        statements.append((p, True))
        statements.append((wrong[i] if subject else wrong[(s + i) % len(wrong)], False))
    statements = statements[:6]
    yes, no = pick(lang, "True", "正确"), pick(lang, "False", "错误")
    body = (
        f'<div class="panel"><div>{pick(lang, "Score", "得分")}: <span id="result-display">0</span></div>'
        f'<div id="progress"></div></div>\n<div class="panel" id="question-card"><div id="question-text"></div>'
        f'<div class="choices"><button class="primary" id="true-btn" data-action="true">{yes}</button>'
        f'<button id="false-btn" data-action="false">{no}</button></div><div class="feedback" id="feedback"></div></div>\n'
        f'<div class="panel hidden" id="final-card">{pick(lang, "Well done! Press Reset to play again.", "完成！按“重置”再玩一次。")}</div>\n'
        f'<button id="reset-btn">{pick(lang, "Reset", "重置")}</button>'
    )
    config = {
        "type": "game",
        "gameType": "quiz",
        "description": text_of(scene.get("description"), topic),
        "questions": [
            {"id": f"g{i + 1}", "question": text, "type": "single", "options": [yes, no], "correct": 0 if ok else 1}
            for i, (text, ok) in enumerate(statements)
        ],
        "scoring": {"correctPoints": 10, "speedBonus": 5},
    }
    right, oops = pick(lang, "Correct!", "答对了！"), pick(lang, "Not quite.", "再想想。")
    script = (
        f"var ITEMS={json.dumps([[t, ok] for t, ok in statements], ensure_ascii=False)};var i=0,score=0;"
        f"var RIGHT={json.dumps(right, ensure_ascii=False)},OOPS={json.dumps(oops, ensure_ascii=False)};\n"
        "function render(){var done=i>=ITEMS.length;document.getElementById('question-card').classList.toggle('hidden',done);"
        "document.getElementById('final-card').classList.toggle('hidden',!done);"
        "document.getElementById('result-display').textContent=score;"
        "document.getElementById('progress').textContent=Math.min(i+1,ITEMS.length)+' / '+ITEMS.length;"
        "if(!done)document.getElementById('question-text').textContent=ITEMS[i][0];}\n"
        "function answer(v){if(i>=ITEMS.length)return;var ok=ITEMS[i][1]===v;if(ok)score+=10;"
        "document.getElementById('feedback').textContent=ok?RIGHT:OOPS;i++;render();}\n"
        "function applyState(s){if(typeof s.question==='number'){i=Math.max(0,Math.min(ITEMS.length,s.question));}"
        "if(typeof s.score==='number'){score=s.score;}render();}\n"
        "document.getElementById('true-btn').addEventListener('click',function(){answer(true);});\n"
        "document.getElementById('false-btn').addEventListener('click',function(){answer(false);});\n"
        "document.getElementById('reset-btn').addEventListener('click',function(){i=0;score=0;"
        "document.getElementById('feedback').textContent='';render();});\nrender();"
    )
    return body, config, script


def interactive(brief: dict[str, Any]) -> str:
    """The HTML page for an ``interactive`` brief."""
    lang = course_language(brief)
    scene = scene_of(brief)
    requirement = text_of(brief.get("requirement"))
    title = text_of(scene.get("title"), pick(lang, "Explore", "动手探索"))
    topic = topic_phrase(requirement) or title
    outline = scene.get("widgetOutline") if isinstance(scene.get("widgetOutline"), dict) else {}
    kind = text_of(scene.get("widgetType"), "simulation")
    model = find_model(topic, requirement, text_of(outline.get("concept")))
    if kind == "simulation":
        body, config, script = _simulation(lang, scene, model, topic)
    elif kind == "game":
        body, config, script = _game(lang, scene, topic, seed("game", requirement, title))
    else:
        body, config, script = _diagram(lang, scene, topic)
    lead = text_of(scene.get("description"), pick(lang, "Try it yourself.", "亲手试一试。"))
    return _page(lang, title, lead, body, config, script)


