"""Repairs of answers that fit their schema but not the run (openmaic.steps.outputs), pure."""

from __future__ import annotations

from openmaic.courses.schema import AgentProfile, OutlineItem, SceneAction, SceneActions, SceneContent, Slide
from openmaic.runs.agents import BUILTIN_AGENTS
from openmaic.steps.outputs import lead_of, repair_actions, repair_outline, repair_roster


def agent(id: str, role: str = "classmate", name: str = "N") -> AgentProfile:
    return AgentProfile(id=id, name=name, role=role, persona="")  # type: ignore[arg-type]


def test_roster_without_a_teacher_is_led_by_its_first_agent():
    roster = repair_roster([agent("mia"), agent("leo", "assistant")])
    assert [(a.id, a.role) for a in roster] == [("mia", "teacher"), ("leo", "assistant")]


def test_empty_roster_gets_the_built_in_teacher():
    assert repair_roster([]) == [BUILTIN_AGENTS["default-1"].profile()]


def test_blank_and_repeated_ids_and_names_are_filled_in():
    roster = repair_roster([agent("", "teacher", ""), agent("x"), agent("x", name="  ")])
    assert [(a.id, a.name) for a in roster] == [("agent-1", "Teacher"), ("x", "N"), ("x-2", "Classmate")]


def test_a_roster_with_a_teacher_is_kept():
    roster = [agent("t", "teacher", "Ms T"), agent("c")]
    assert repair_roster(roster) == roster and lead_of(roster) == "t"


def test_no_actions_become_the_lead_presenting_the_content():
    content = SceneContent(kind="slide", slide=Slide(title="Leaves", bullets=["Light", "  ", "Water"]))
    fixed = repair_actions(SceneActions(actions=[]), [agent("c"), agent("t", "teacher")], content)
    assert [(a.kind, a.agent_id, a.text) for a in fixed.actions] == \
        [("speech", "t", "Leaves"), ("speech", "t", "Light"), ("speech", "t", "Water")]


def test_actions_by_strangers_go_to_the_lead():
    acts = SceneActions(actions=[SceneAction(kind="speech", agent_id="ghost", text="hi"),
                                 SceneAction(kind="ask", agent_id="c", text="why?")])
    fixed = repair_actions(acts, [agent("t", "teacher"), agent("c")])
    assert [a.agent_id for a in fixed.actions] == ["t", "c"]


def test_blank_outline_titles_are_filled_in():
    items = [OutlineItem(title=" ", goal="Understand how leaves make sugar from light", kind="slide"),
             OutlineItem(title="", goal=""), OutlineItem(title="Kept", goal="g")]
    assert [i.title for i in repair_outline(items)] == ["Understand how leaves make sugar from light", "Scene 2",
                                                        "Kept"]
