"""The subject of a requirement, as a short noun phrase in the requirement's own language.

What is peeled off: request verbs ("please create", "teach me", "请为…设计"), the audience ("for 8th graders",
"给高中生"), course words ("a hands-on introduction to", "一门…的互动课程") and trailing conditions ("with an
interactive exercise", "，包含互动练习"). A marker word is only a marker on its own: the "on" of "hands-on" is
not "on". Callers never build a sentence with the topic as its grammatical subject, so the number of the
phrase ("binary numbers") never has to agree with a verb.
"""

from __future__ import annotations

import re

from openmaic.models.demo_course.language import has_han, is_chinese_text

# --- English ---------------------------------------------------------------------------------------------

_EN_LEAD = re.compile(
    r"^(?:(?:please|pls|kindly|can you|could you|would you|i want(?: you)? to|i'd like(?: you)? to|i would like"
    r"(?: you)? to|i want|i'd like|i would like|let's|lets|help me|help us|we need|i need)\b[\s,]*)+",
    re.I,
)
_EN_VERB = re.compile(
    r"^(?:create|make|build|generate|design|write|prepare|produce|develop|put together|draft|give(?: me| us)?|"
    r"teach(?: me| us)?|explain|show(?: me| us)?|understand|learn(?: about)?|study|cover|introduce|present|"
    r"run|plan|outline)\b[\s,]*",
    re.I,
)
_EN_MARKER = re.compile(r"(?<![\w-])(?:about|on|covering|regarding|concerning|explaining|introducing)\s+", re.I)
_EN_ADJ = (
    r"(?:a|an|the|one|short|brief|quick|small|simple|fun|engaging|complete|full|mini|basic|gentle|practical|"
    r"hands-on|hands on|interactive|introductory|beginner'?s?|advanced|intermediate|friendly|visual|"
    r"\d+[- ]minutes?|\d+[- ]?min|one-hour|two-hour|half-hour|self-paced|online|live)"
)
_EN_COURSE = re.compile(
    rf"^(?:{_EN_ADJ}\s+)*(?:crash course|course|class|lesson|lecture|tutorial|introduction|intro|overview|primer|"
    r"workshop|guide|unit|module|session|explainer|presentation|deck|walkthrough|classroom|seminar|talk)s?"
    r"(?:\s+(?:to|on|of|about|for|in|into|covering))?\s+",
    re.I,
)
_EN_PREFIX = re.compile(
    r"^(?:(?:an?\s+|the\s+)?(?:introduction|intro|overview|basics|fundamentals|foundations|principles|essentials|"
    r"elements|history|science|art|world)\s+(?:to|of|in|behind)\s+|(?:how|why|what)\s+(?:to\s+)?)",
    re.I,
)
_EN_ADJ_LEAD = re.compile(rf"^(?:{_EN_ADJ}\s+)+", re.I)
_EN_CUT = re.compile(
    r"\s+(?:for|with|so that|so they|aimed at|targeting|suitable for|that|which|using|including|in \d+|"
    r"in under|within|and include|and add|to help|to teach|where|who|by|at (?:a|an|the)\s+\w+ level)\b"
    r"|\s+to\s+(?=(?:\d|kids|children|students|beginners|adults|teens|my|our|high|middle|college|first|new)\b)"
    r"|[.,;:!?\n()\[\]{}\"“”]|\s+-\s+",
    re.I,
)
_EN_AUDIENCE_LEAD = re.compile(
    r"^(?:(?:my|our|the|some)\s+)?(?:\d+(?:st|nd|rd|th)[- ]?graders?|kids|children|students|pupils|teens|"
    r"teenagers|beginners|adults|engineers|developers|nurses|managers|employees|(?:high|middle) school(?:ers| students)?|"
    r"college students|undergrads?|undergraduates)\s+",
    re.I,
)
_EN_TAIL = re.compile(r"\s+(?:works?|basics|fundamentals|essentials|101|course|lesson|class)$", re.I)
_PROPER = frozenset(
    """python java javascript typescript sql html css git linux windows excel rust go c++ kotlin swift react
    newton ohm einstein darwin french english chinese spanish german roman greek british american european
    african asian world shakespeare mars earth jupiter venus pythagoras fourier bayes euler""".split()
)


def _english(requirement: str) -> str:
    text = " ".join(requirement.split()).strip(" .!?")
    for _ in range(3):
        text = _EN_LEAD.sub("", text)
        text = _EN_VERB.sub("", text)
    m = _EN_MARKER.search(text)
    if m:
        text = text[m.end() :]
    text = _EN_AUDIENCE_LEAD.sub("", text)
    for _ in range(3):
        before = text
        text = _EN_COURSE.sub("", text)
        text = _EN_PREFIX.sub("", text)
        text = _EN_ADJ_LEAD.sub("", text)
        if text == before:
            break
    text = _EN_CUT.split(text, maxsplit=1)[0].strip()
    text = _EN_TAIL.sub("", text).strip()
    text = re.sub(r"^(?:the|a|an|some)\s+", "", text, flags=re.I)
    words = text.split()[:6]
    if not words:
        return ""
    first = words[0]
    rest_lower = all(w == w.lower() for w in words[1:])
    if first[:1].isupper() and first[1:] == first[1:].lower() and rest_lower and first.lower().split("'")[0] not in _PROPER:
        words[0] = first.lower()
    return " ".join(words)


# --- Chinese ---------------------------------------------------------------------------------------------

_ZH_ABOUT = [
    re.compile(r"(?:主题|题目|内容)(?:是|为)[：:“\"「]?([^，。；！？,;!?”\"」]{2,24})"),
    re.compile(r"关于([^，。；！？,;!?]{2,24}?)的"),
    re.compile(r"关于([^，。；！？,;!?的]{2,24})"),
]
_ZH_LEAD = re.compile(r"^(?:请你?|麻烦|帮我|帮忙|我想要?|我要|我们想|希望|能否|可以|能不能|给我|想)+")
_ZH_AUDIENCE = re.compile(
    r"(?:给|为|向|面向|针对|教|带)(?:[^，。；\s]{0,6}?)"
    r"(?:小学生|初中生|高中生|中学生|大学生|研究生|学生们?|孩子们?|小朋友们?|儿童|工程师|开发者|开发人员|新手|初学者|员工|"
    r"职场人士|同学们?|家长|老师们?|年级学生|年级的?学生|零基础的?人|大家)"
)
_ZH_VERB = re.compile(
    r"^(?:讲解一下|讲解|讲讲|讲一讲|讲一下|讲|介绍一下|介绍|教一教|教|学习|了解|认识|设计|制作|准备|生成|创建|编写|写|"
    r"开设|开发|做|出|上|搞)+"
)
_ZH_COUNT = re.compile(r"^(?:一|两|几)?(?:门|节|堂|个|份|套|次|篇|组)")
_ZH_ADJ = re.compile(r"^(?:简短|简单|有趣|生动|完整|基础|入门级?|互动式?|交互式?|动手|实践|轻松|系统)的?")
_ZH_TAIL = re.compile(
    r"(?:的)?(?:基础知识|基本知识|基础|入门|知识点?|原理|课程|课件|课|讲座|教程|简介|概述|介绍|讲解|互动练习|练习|"
    r"小测验|测验|内容|专题|主题)$"
)


def _chinese(requirement: str) -> str:
    text = re.sub(r"\s+", "", requirement)
    for pattern in _ZH_ABOUT:
        m = pattern.search(text)
        if m:
            text = m.group(1)
            break
    else:
        text = re.split(r"[，。；！？,;!?、]", text, maxsplit=1)[0]
    for _ in range(4):
        before = text
        text = _ZH_LEAD.sub("", text)
        text = _ZH_AUDIENCE.sub("", text)
        text = _ZH_VERB.sub("", text)
        text = _ZH_COUNT.sub("", text)
        text = _ZH_ADJ.sub("", text)
        text = _ZH_TAIL.sub("", text)
        text = text.strip("的“”\"「」《》 ")
        if text == before:
            break
    return text[:16]


def topic_of(requirement: str) -> str:
    """The subject of ``requirement`` ("" when nothing is left after peeling)."""
    requirement = requirement or ""
    if is_chinese_text(requirement):
        return _chinese(requirement)
    topic = _english(requirement)
    return topic if not has_han(topic) or is_chinese_text(topic) else ""


def topic_phrase(requirement: str) -> str:
    """The topic as it reads inside an English sentence: with "the" when the requirement says "the French
    Revolution" (titles that start with the topic use :func:`topic_of`)."""
    topic = topic_of(requirement)
    if topic and not has_han(topic) and re.search(rf"\bthe\s+{re.escape(topic)}\b", requirement or "", re.I):
        return "the " + topic
    return topic


_SMALL = frozenset("a an and as at by for in of on or the to vs with from into".split())


def title_case(text: str) -> str:
    """Title case that keeps acronyms and small words ("intro to SQL joins" → "Intro to SQL Joins")."""
    out = []
    for i, w in enumerate(text.split()):
        if w != w.lower() or has_han(w):
            out.append(w)
        elif i and w in _SMALL:
            out.append(w)
        else:
            out.append("-".join(p[:1].upper() + p[1:] for p in w.split("-")))
    return " ".join(out)


def capital(text: str) -> str:
    """The text with its first letter upper-cased (for the start of an English sentence or title); a leading
    ``[Chart]``-style marker is skipped."""
    m = re.match(r"\s*\[\w+\]\s*", text)
    head = m.end() if m else 0
    return text[:head] + text[head : head + 1].upper() + text[head + 1 :]
