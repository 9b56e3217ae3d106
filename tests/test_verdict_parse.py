"""Model text → verdict: the one parser every provider shares (SPEC §4.1, §6)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from watcher.models import AttemptError, Category, Priority, Verdict
from watcher.providers import parse_verdict_text, verdict_json_schema

GOOD: dict[str, Any] = {
    "needs_reply": True,
    "category": "question",
    "priority": "normal",
    "summary": "Asks how to run the token bucket across processes.",
    "reply_hint": "Explain a shared store or a per-worker limit.",
}


def _kind(result: Verdict | AttemptError) -> str:
    return result.kind if isinstance(result, AttemptError) else "verdict"


def test_a_json_object_with_every_field_is_a_verdict() -> None:
    """A plain JSON object that matches the schema becomes a Verdict."""
    assert parse_verdict_text(json.dumps(GOOD)) == Verdict(**GOOD)


def test_a_single_json_fence_is_stripped() -> None:
    """Models often wrap their answer in ```json … ```; one such fence is accepted."""
    assert parse_verdict_text(f"```json\n{json.dumps(GOOD)}\n```") == Verdict(**GOOD)


def test_a_bare_fence_is_stripped() -> None:
    """A fence without a language tag is accepted too."""
    assert parse_verdict_text(f"  ```\n{json.dumps(GOOD, indent=2)}\n```\n") == Verdict(**GOOD)


def test_prose_around_the_json_is_malformed() -> None:
    """Only a fence may surround the object; explanatory prose is not a JSON object."""
    assert _kind(parse_verdict_text(f"Here is the verdict: {json.dumps(GOOD)}")) == "malformed_json"


def test_two_fences_are_malformed() -> None:
    """Exactly one fence is stripped; two fenced blocks are not one JSON object."""
    block = f"```json\n{json.dumps(GOOD)}\n```"
    assert _kind(parse_verdict_text(f"{block}\n{block}")) == "malformed_json"


def test_json_that_is_not_an_object_is_malformed() -> None:
    """A JSON array, string or number is malformed_json, not invalid_verdict."""
    for text in ("[1, 2]", '"question"', "42", "null", "true"):
        assert _kind(parse_verdict_text(text)) == "malformed_json", text


def test_empty_text_is_malformed() -> None:
    """An empty answer is malformed_json."""
    assert _kind(parse_verdict_text("")) == "malformed_json"


def test_deeply_nested_json_is_malformed_not_a_crash() -> None:
    """Nesting deep enough to exhaust the recursion limit is classified, not raised."""
    assert _kind(parse_verdict_text("[" * 100_000)) == "malformed_json"


def test_a_missing_field_is_an_invalid_verdict() -> None:
    """Every field is required."""
    data = {k: v for k, v in GOOD.items() if k != "reply_hint"}
    assert _kind(parse_verdict_text(json.dumps(data))) == "invalid_verdict"


def test_an_extra_field_is_an_invalid_verdict() -> None:
    """Unknown fields are refused (extra="forbid")."""
    assert _kind(parse_verdict_text(json.dumps({**GOOD, "confidence": 0.9}))) == "invalid_verdict"


def test_an_unknown_category_is_an_invalid_verdict() -> None:
    """Category must be one of the seven names."""
    assert _kind(parse_verdict_text(json.dumps({**GOOD, "category": "rant"}))) == "invalid_verdict"


def test_an_over_long_summary_is_an_invalid_verdict() -> None:
    """The summary is limited to 280 characters."""
    assert (
        _kind(parse_verdict_text(json.dumps({**GOOD, "summary": "x" * 281}))) == "invalid_verdict"
    )


def test_invalid_verdict_message_names_the_field_not_the_value() -> None:
    """The message points at the failing field and does not echo model text back."""
    result = parse_verdict_text(json.dumps({**GOOD, "priority": "SECRET-ish value"}))
    assert isinstance(result, AttemptError)
    assert "priority" in result.message and "SECRET-ish" not in result.message


def test_schema_is_strict_with_every_property_required() -> None:
    """additionalProperties is false and required lists every property (OpenAI strict mode)."""
    schema = verdict_json_schema()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"]) == set(Verdict.model_fields)


def test_schema_enums_match_the_verdict_model() -> None:
    """The schema's category and priority enums are exactly the model's literals."""
    schema = verdict_json_schema()
    assert schema["properties"]["category"]["enum"] == list(Category.__args__)
    assert schema["properties"]["priority"]["enum"] == list(Priority.__args__)


_other_values = {
    "needs_reply": st.booleans() | st.sampled_from([0, 1, "true", None]),
    "category": st.sampled_from([*Category.__args__, "Question", ""]),
    "priority": st.sampled_from([*Priority.__args__, "urgent", None]),
    "summary": st.text(max_size=290) | st.integers(),
    "reply_hint": st.text(max_size=510) | st.none(),
    "confidence": st.floats(0, 1),
}


@st.composite
def _near_verdicts(draw: st.DrawFn) -> dict[str, Any]:
    """A good verdict with up to two fields dropped, changed or added."""
    data = dict(GOOD)
    for name in draw(st.sets(st.sampled_from(sorted(_other_values)), max_size=2)):
        if draw(st.booleans()):
            data.pop(name, None)
        else:
            data[name] = draw(_other_values[name])
    return data


@settings(max_examples=400, deadline=None)
@given(_near_verdicts())
def test_the_schema_and_the_verdict_model_accept_the_same_objects(data: dict[str, Any]) -> None:
    """An object fits the schema exactly when the Verdict model (strict, no coercion) takes it;
    string lengths aside, which the schema states in words (the next test)."""
    summary, hint = data.get("summary"), data.get("reply_hint")
    assume(not isinstance(summary, str) or 1 <= len(summary) <= 280)
    assume(not isinstance(hint, str) or len(hint) <= 500)
    schema_ok = Draft202012Validator(verdict_json_schema()).is_valid(data)
    try:
        Verdict.model_validate(data, strict=True)
    except ValidationError:
        model_ok = False
    else:
        model_ok = True
    assert schema_ok == model_ok


def test_schema_states_the_models_length_limits_in_words() -> None:
    """OpenAI strict mode takes no minLength/maxLength: the limits travel in the descriptions."""
    properties = verdict_json_schema()["properties"]
    limits = Verdict.model_json_schema()["properties"]
    assert "1 to 280 characters" in properties["summary"]["description"]
    assert "at most 500 characters" in properties["reply_hint"]["description"]
    assert (limits["summary"]["minLength"], limits["summary"]["maxLength"]) == (1, 280)
    assert limits["reply_hint"]["maxLength"] == 500
    assert not any("maxLength" in p or "minLength" in p for p in properties.values())


def test_schema_is_a_fresh_copy_each_time() -> None:
    """Editing one request's schema cannot leak into the next request."""
    verdict_json_schema()["properties"].clear()
    assert "summary" in verdict_json_schema()["properties"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    """Any model text is a verdict or one of the two parse kinds, never an exception."""
    assert _kind(parse_verdict_text(text)) in {"verdict", "malformed_json", "invalid_verdict"}


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*GOOD, "other"]), _json_values, max_size=7))
def test_arbitrary_json_objects_never_raise(data: dict[str, Any]) -> None:
    """Objects with verdict-like keys and arbitrary values are a verdict or invalid_verdict."""
    assert _kind(parse_verdict_text(json.dumps(data))) in {"verdict", "invalid_verdict"}


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        Verdict,
        needs_reply=st.booleans(),
        category=st.sampled_from(Category.__args__),
        priority=st.sampled_from(Priority.__args__),
        summary=st.text(min_size=1, max_size=280),
        reply_hint=st.text(max_size=500),
    ),
    st.booleans(),
)
def test_every_valid_verdict_round_trips(verdict: Verdict, fenced: bool) -> None:
    """A valid verdict serialised by a model (fenced or not) parses back to itself."""
    text = verdict.model_dump_json()
    assert parse_verdict_text(f"```json\n{text}\n```" if fenced else text) == verdict
