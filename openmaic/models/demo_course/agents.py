"""The agents answer: ``{agents: [...]}``: a teacher, an assistant and two students, in the course language."""

from __future__ import annotations

from typing import Any

from openmaic.models.demo_course.brief import seed, text_of
from openmaic.models.demo_course.language import ZH, audience, audience_name, course_language
from openmaic.models.demo_course.topic import topic_phrase

_TEACHERS = {
    "en": ["Dr. Ada Rivera", "Prof. Kenji Sato", "Ms. Amara Okafor", "Mr. Lukas Berg"],
    "zh": ["王老师", "李老师", "陈老师", "赵老师"],
}
_ASSISTANTS = {"en": ["Sam", "Priya", "Noah", "Lina"], "zh": ["小林", "小周", "小吴", "小何"]}
_STUDENTS = {
    "en": [
        ("Mia", "Curious and quick to ask for a concrete example whenever an idea feels abstract."),
        ("Leo", "A friendly sceptic who tests every claim with a 'what if' question."),
        ("Zoe", "Quiet and careful; she sums up what she heard in her own words."),
        ("Omar", "Enthusiastic and always links new ideas to everyday life."),
    ],
    "zh": [
        ("小美", "好奇心强，遇到抽象的概念总会追问一个具体的例子。"),
        ("阿杰", "爱提“如果……会怎样”的问题，喜欢验证每个结论。"),
        ("思思", "安静细心，习惯用自己的话复述刚学到的内容。"),
        ("大伟", "热情活泼，总能把新知识和日常生活联系起来。"),
    ],
}


def agents(brief: dict[str, Any]) -> dict[str, Any]:
    """The roster for an ``agents`` brief."""
    lang = course_language(brief)
    key = "zh" if lang == ZH else "en"
    requirement = text_of(brief.get("requirement"))
    topic = topic_phrase(requirement) or text_of(brief.get("courseTitle"), "这门课" if lang == ZH else "this course")
    who = audience_name(lang, audience(requirement))
    s = seed("agents", requirement)
    if lang == ZH:
        teacher = f"一位耐心的老师，面向{who}讲解{topic}，讲解条理清楚，善用生活中的例子。"
        assistant = "助教，负责在每页结束时帮大家回顾要点，并耐心解答后续问题。"
    else:
        teacher = (
            f"A patient teacher who explains {topic} to {who} in clear steps, with concrete everyday examples."
        )
        assistant = "A teaching assistant who recaps each page and answers follow-up questions patiently."
    roster = [
        {"name": _TEACHERS[key][s % 4], "role": "teacher", "persona": teacher},
        {"name": _ASSISTANTS[key][(s >> 4) % 4], "role": "assistant", "persona": assistant},
    ]
    first = (s >> 8) % 4
    for i in range(2):
        name, persona = _STUDENTS[key][(first + i) % 4]
        roster.append({"name": name, "role": "student", "persona": persona})
    return {"agents": roster}
