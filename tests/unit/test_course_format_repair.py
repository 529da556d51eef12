"""Reading JSON out of a model's answer (format §7.6)."""

from __future__ import annotations

from typing import Any

import pytest

from openmaic.courses.format import parse_json_response


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is:\n```\n[1, 2]\n```\nAnything else?', [1, 2]),
        ('Here you go: {"a": [1, 2]} hope that helps', {"a": [1, 2]}),
        ('<think>maybe {"no": 1} or [</think>\n[{"x": 1}]', [{"x": 1}]),
        ('<reasoning>…</reasoning>{"x": 2}', {"x": 2}),
        ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
        ('{"a": "x, ]", "b": [1,]}', {"a": "x, ]", "b": [1]}),
        ('{"id": "t", "height: 76", "fixedRatio: false"}', {"id": "t", "height": 76, "fixedRatio": False}),
        ('{"text": "line one\nline two\ttab"}', {"text": "line one\nline two\ttab"}),
        ('{"a": "C:\\Sand\\Lots"}', {"a": "C:\\Sand\\Lots"}),
        ('{"a": "keep\\nnew line and \\"quotes\\""}', {"a": 'keep\nnew line and "quotes"'}),
        ("no json here", None),
        ("", None),
    ],
)  # fmt: skip
def test_answers(answer: str, expected: Any) -> None:
    assert parse_json_response(answer) == expected


def test_tex_with_single_backslashes_is_kept_as_tex() -> None:
    answer = '{"latex": "\\frac{a}{b} + \\theta + \\beta + \\nu + \\rho + \\alpha + \\sqrt{2}", "t": "a\\nb"}'
    assert parse_json_response(answer) == {"latex": r"\frac{a}{b} + \theta + \beta + \nu + \rho + \alpha + \sqrt{2}",
                                           "t": "a\nb"}  # fmt: skip


def test_truncated_array_is_cut_after_the_last_complete_item() -> None:
    assert parse_json_response('[{"id": 1}, {"id": 2}, {"id": 3, "te') == [{"id": 1}, {"id": 2}]
    cut_text = '[{"type": "text", "content": "Hi"}, {"type": "text", "content": "Hello wor'
    assert parse_json_response(cut_text) == [{"type": "text", "content": "Hi"}]
    assert parse_json_response('```json\n[{"a": 1}, {"b": 2}') == [{"a": 1}, {"b": 2}]


def test_truncated_object_is_closed() -> None:
    assert parse_json_response('{"a": 1, "b": [1, 2') == {"a": 1, "b": [1, 2]}
    answer = '{"elements": [{"id": "a"}, {"id": "b"}], "remark": "cut off mid-sent'
    assert parse_json_response(answer) == {"elements": [{"id": "a"}, {"id": "b"}]}
