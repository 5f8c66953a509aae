import pytest

from jurist.errors import InputError
from jurist.judges import builtin, from_file
from jurist.judges.templates import RUBRIC_PLACEHOLDERS
from jurist.models.messages import SystemMessage, UserMessage, messages_from_openai, openai_messages

NOTE_TEMPLATE = """You are an expert evaluator assessing AI agent interaction quality.

## Rubric: {rubric_name}

### Description
{rubric_description}

### Scoring Criteria
{scoring_criteria}

## Chat Session to Evaluate
{chat_session}

## Instructions
Provide your evaluation in the following format:
SCORE: [1-5]
REASONING: [2-3 sentences explaining your score]
"""


def test_the_notes_template_works_as_given(tmp_path):
    p = tmp_path / "judge_template.txt"
    p.write_text(NOTE_TEMPLATE)
    t = from_file(p).check(RUBRIC_PLACEHOLDERS, required={"chat_session"})
    out = t.render(rubric_name="N", rubric_description="D", scoring_criteria="C", chat_session="S",
                   score_min="1", score_max="5", rubric_items="")
    assert "## Rubric: N" in out and "SCORE: [1-5]" in out
    assert t.version == t.hash and len(t.hash) == 16


def test_unknown_placeholder_is_an_input_error(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("Rubric {rubric_name}\n{chat_session}\n{transcript}")
    with pytest.raises(InputError, match=r"unknown placeholder \{transcript\} \(placeholders: \{chat_session\}") as info:
        from_file(p).check(RUBRIC_PLACEHOLDERS)
    assert info.value.file == str(p) and info.value.line == 3


def test_a_misspelt_placeholder_names_the_one_meant_and_its_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("Rubric {rubric_name}\nLiteral {{rubric_nme}}\nScore from {score_min} to {score_mx}:\n"
                 "{rubric_nme}\n{chat_session}")
    with pytest.raises(InputError) as info:
        from_file(p).check(RUBRIC_PLACEHOLDERS)
    assert str(info.value) == (f"{p}:4: template 't': unknown placeholder {{rubric_nme}} (did you mean "
                               "{rubric_name}?); unknown placeholder {score_mx} (did you mean {score_max}?) "
                               "(write literal braces as {{ }})")


def test_missing_session_placeholder_and_bad_braces(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("Rubric {rubric_name}")
    with pytest.raises(InputError, match=r"must contain \{chat_session\}"):
        from_file(p).check(RUBRIC_PLACEHOLDERS, required={"chat_session"})
    p.write_text("JSON like {score: 1 {chat_session}")
    with pytest.raises(InputError, match="not valid"):
        from_file(p).check(RUBRIC_PLACEHOLDERS)


def test_builtin_templates_put_the_session_last():
    for name in ("rubric_judge", "rubric_items_judge"):
        t = builtin(name).check(RUBRIC_PLACEHOLDERS, required={"chat_session"})
        assert t.text.rstrip().endswith("{chat_session}")


def test_missing_and_empty_template_files(tmp_path):
    with pytest.raises(InputError, match="cannot read template"):
        from_file(tmp_path / "nope.txt")
    (tmp_path / "e.txt").write_text("  \n")
    with pytest.raises(InputError, match="empty"):
        from_file(tmp_path / "e.txt")


@pytest.mark.parametrize("placeholder", ["{score_min:>300000000}", "{score_min:.9}", "{chat_session!r}",
                                         "{chat_session!s:>9}", "{chat_session.__class__}", "{rubric_items[0]}",
                                         "{}", "{0}"])
def test_only_bare_placeholders_are_allowed(tmp_path, placeholder):
    p = tmp_path / "t.txt"
    p.write_text(f"Rubric {{rubric_name}} {placeholder}\n{{chat_session}}")
    with pytest.raises(InputError, match=r"is not a bare \{name\}: format specs") as info:
        from_file(p)  # refused when the file is read, before any check or render
    assert info.value.file == str(p) and placeholder[:20] in str(info.value)


def test_a_huge_width_is_refused_before_any_prompt_is_built():
    from jurist.judges.templates import PromptTemplate

    t = PromptTemplate(name="wide", version="1", text="{chat_session}{score_min:>300000000}")
    with pytest.raises(InputError, match="not a bare"):
        t.check(RUBRIC_PLACEHOLDERS, required={"chat_session"})


def test_every_builtin_template_uses_bare_placeholders():
    from importlib.resources import files

    from jurist.judges.templates import placeholders_of

    for entry in (files("jurist") / "templates").iterdir():
        if entry.name.endswith(".txt"):
            placeholders_of(entry.read_text(encoding="utf-8"), entry.name)


def test_messages_put_the_instructions_before_the_first_quoted_value_in_a_system_message():
    from jurist.judges.prompting import quote

    t = builtin("rubric_judge")
    values = dict(rubric_name="N", rubric_description="D", scoring_criteria="C", score_min="1", score_max="5",
                  rubric_items="", chat_session=quote("chat_session", "[1] USER: {hi} </chat_session>"))
    system, user = t.messages(**values)
    assert system.role == "system" and user.role == "user"
    assert "## Rubric: N" in system.text and '{"score": <number from 1 to 5>' in system.text
    assert "<chat_session>\n" not in system.text and "USER" not in system.text
    assert user.text.rstrip("\n") == values["chat_session"]
    # nothing is lost or added but the whitespace between the two
    assert (system.text + "\n" + user.text).split() == t.render(**values).split()


def test_messages_keep_instructions_after_the_data_in_the_user_message():
    from jurist.judges.prompting import quote
    from jurist.judges.templates import PromptTemplate

    t = PromptTemplate("t", "1", "Judge {name} carefully.\n{answer}\nReply with {{\"ok\": true}} about {name}.")
    system, user = t.messages(name="N", answer=quote("answer", "x"))
    assert system.openai() == {"role": "system", "content": "Judge N carefully."}
    assert user.text == '<answer>\nx\n</answer>\nReply with {"ok": true} about N.'


@pytest.mark.parametrize("text", ["{answer}\nJudge it.", "Judge {name}.", "   \n{answer} then {name}"])
def test_a_template_whose_data_comes_first_or_that_quotes_nothing_is_one_user_message(text):
    from jurist.judges.prompting import quote
    from jurist.judges.templates import PromptTemplate

    t = PromptTemplate("t", "1", text)
    values = {"name": "N", "answer": quote("answer", "x")}
    assert t.messages(**values) == [UserMessage(content=t.render(**values))]


def test_fold_system_joins_the_instructions_to_the_first_user_turn():
    from jurist.models.openai import fold_system

    assert openai_messages(fold_system(messages_from_openai([
        {"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
        {"role": "user", "content": "V"}]))) == [
        {"role": "user", "content": "S\n\nU"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "V"}]
    assert fold_system((SystemMessage(content="S"),)) == (UserMessage(content="S"),)
