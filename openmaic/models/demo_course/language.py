"""The course language and audience, read from the requirement, and text measured the way a canvas draws it.

A requirement is Chinese when CJK characters carry it (a Latin product name inside a Chinese sentence does not
make it English); without a requirement the brief's BCP-47 ``language`` decides. The audience is one of
``children``, ``school`` (middle and high school), ``university``, ``professional`` or ``general``.
"""

from __future__ import annotations

import re
from typing import Any

EN, ZH = "en", "zh"

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def is_cjk(ch: str) -> bool:
    """Whether one character is drawn about one font-size wide (CJK ideographs and full-width punctuation)."""
    return bool(_CJK.match(ch))


def has_han(text: str) -> bool:
    """Whether the text holds at least one Chinese character."""
    return bool(_HAN.search(text))


def is_chinese_text(text: str) -> bool:
    """Whether Chinese carries the text: some Han characters, at least half as many as Latin letters."""
    han = len(_HAN.findall(text))
    return han > 0 and han * 2 >= len(_LATIN.findall(text))


def course_language(brief: dict[str, Any]) -> str:
    """``zh`` or ``en``: the requirement's language, else the brief's ``language`` tag."""
    requirement = brief.get("requirement")
    if isinstance(requirement, str) and (_HAN.search(requirement) or _LATIN.search(requirement)):
        return ZH if is_chinese_text(requirement) else EN
    tag = brief.get("language")
    return ZH if isinstance(tag, str) and tag.lower().startswith("zh") else EN


def pick(lang: str, en: str, zh: str) -> str:
    """The English or the Chinese string."""
    return zh if lang == ZH else en


def join(lang: str, items: list[str]) -> str:
    """A list in running text: "a, b and c" / "a、b和c"."""
    items = [i for i in items if i]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    if lang == ZH:
        return "、".join(items[:-1]) + "和" + items[-1]
    return ", ".join(items[:-1]) + " and " + items[-1]


def sentence(lang: str, text: str) -> str:
    """``text`` ending with a full stop of its language (unless it already ends with punctuation)."""
    text = text.strip()
    if not text or text[-1] in ".!?。！？…":
        return text
    return text + ("。" if lang == ZH else ".")


# --- audience ---------------------------------------------------------------------------------------------

CHILDREN, SCHOOL, UNIVERSITY, PROFESSIONAL, GENERAL = "children", "school", "university", "professional", "general"

_AUDIENCE_WORDS = [
    (CHILDREN, r"\b(?:kids?|child(?:ren)?|elementary|primary[- ]school|kindergarten|young learners|pupils)\b"
               r"|小学|儿童|孩子|小朋友|幼儿|低年级|学龄前"),
    (SCHOOL, r"\b(?:high[- ]school(?:ers)?|middle[- ]school(?:ers)?|secondary|teen(?:s|agers?)?|gcse|a-levels?)\b"
             r"|高中|初中|中学|中考|高考"),
    (UNIVERSITY, r"\b(?:universit(?:y|ies)|college|undergrad(?:uate)?s?|graduate students|freshm[ae]n|campus)\b"
                 r"|大学|本科|研究生|高校|大一|大二"),
    (PROFESSIONAL, r"\b(?:professionals?|engineers?|developers?|managers?|employees?|staff|workplace|practitioners?"
                   r"|nurses?|analysts?|executives?|colleagues|on the job)\b"
                   r"|职场|工程师|从业者|员工|专业人士|开发者|开发人员|管理者|经理|同事|企业培训"),
]


def audience(requirement: str, profile: Any = None) -> str:
    """The audience a requirement (and a learner profile's bio) names; ``general`` when none."""
    text = requirement
    if isinstance(profile, dict) and isinstance(profile.get("bio"), str):
        text += " " + profile["bio"]
    low = text.lower()
    m = re.search(r"(\d{1,2})[- ]?(?:year[- ]olds?|yo\b|岁)", low)
    if m:
        return CHILDREN if int(m.group(1)) <= 11 else SCHOOL if int(m.group(1)) <= 18 else GENERAL
    m = re.search(r"\b(?:grade\s*(\d{1,2})|(\d{1,2})(?:st|nd|rd|th)[- ]?grade(?:rs)?)\b", low)
    if m:
        return CHILDREN if int(m.group(1) or m.group(2)) <= 5 else SCHOOL
    m = re.search(r"([一二三四五六])年级", text)
    if m and "初" not in text and "高" not in text:
        return CHILDREN
    for name, pattern in _AUDIENCE_WORDS:
        if re.search(pattern, low):
            return name
    return GENERAL


_AUDIENCE_NAMES = {
    CHILDREN: ("young learners", "小学生"),
    SCHOOL: ("secondary-school students", "中学生"),
    UNIVERSITY: ("university students", "大学生"),
    PROFESSIONAL: ("working professionals", "职场专业人士"),
    GENERAL: ("curious learners", "感兴趣的学习者"),
}


def audience_name(lang: str, who: str) -> str:
    """How the audience is named in running text."""
    en, zh = _AUDIENCE_NAMES.get(who, _AUDIENCE_NAMES[GENERAL])
    return pick(lang, en, zh)


def directive(lang: str, who: str) -> str:
    """The course-wide language directive (two to four sentences)."""
    if lang == ZH:
        style = {
            CHILDREN: "用简短的句子和生活中的例子，语气亲切，每页只讲一个新概念。",
            SCHOOL: "用清楚的步骤讲解，术语第一次出现时给出解释。",
            UNIVERSITY: "使用准确的学科术语，兼顾原理推导与应用。",
            PROFESSIONAL: "聚焦实际工作场景，语言简洁，直接给出可操作的要点。",
            GENERAL: "语言通俗易懂，先讲直觉再讲细节。",
        }[who]
        return (
            f"全部内容使用简体中文讲授，面向{audience_name(lang, who)}。{style}"
            "专有名词和编程关键字保留英文原文，必要时附中文解释。"
        )
    style = {
        CHILDREN: "Use short sentences, friendly everyday examples and one new idea per page.",
        SCHOOL: "Explain in clear steps and define each term the first time it appears.",
        UNIVERSITY: "Use precise subject terminology and connect principles with applications.",
        PROFESSIONAL: "Stay close to real work situations, be concise and give actionable points.",
        GENERAL: "Use plain language and build intuition before details.",
    }[who]
    return (
        f"Teach the whole course in English for {audience_name(lang, who)}. {style} "
        "Keep product names and programming keywords in their original form."
    )


# --- measuring text ---------------------------------------------------------------------------------------

_NARROW = set("il.,:;'|!()[]{}` ")
_WIDE = set("mwMW@%")


def char_width(ch: str, size: float) -> float:
    """The drawn width of one character at ``size`` px: CJK about one em, Latin about half."""
    if is_cjk(ch):
        return size
    if ch in _NARROW:
        return size * 0.32
    if ch in _WIDE:
        return size * 0.85
    if ch.isupper() or ch.isdigit():
        return size * 0.64
    return size * 0.54


def text_width(text: str, size: float) -> float:
    """The drawn width of a one-line string at ``size`` px."""
    return sum(char_width(ch, size) for ch in text)


def wrap(text: str, size: float, width: float) -> list[str]:
    """``text`` broken into lines no wider than ``width`` (Latin at spaces, CJK anywhere)."""
    lines: list[str] = []
    line, used = "", 0.0
    for token in re.findall(r"[A-Za-z0-9_'’\-.,:;!?()%/+=]+ ?|\s|.", text):
        w = text_width(token, size)
        if line and used + text_width(token.rstrip(), size) > width:
            lines.append(line.rstrip())
            line, used = "", 0.0
            if token.isspace():
                continue
        while w > width and not line:  # one token wider than the box: cut it
            cut = 1
            while cut < len(token) and text_width(token[: cut + 1], size) <= width:
                cut += 1
            lines.append(token[:cut])
            token = token[cut:]
            w = text_width(token, size)
        line += token
        used += w
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def text_height(lines: int, size: float, paragraphs: int = 1) -> float:
    """A text box's height at line-height 1.5 with 10 px padding (the table of §3.3), plus paragraph spacing."""
    return round(1.5 * size * lines + 22 + 5 * max(0, paragraphs - 1))
