"""Bad input: whatever a model server or a Forem payload says, watcher stores it or rejects it.

Hypothesis drives the real openai provider (over an ``httpx.MockTransport``) and the real export
reader; what they return must survive the durable write and read back. Then the front ends
against the loopback fake: ids that try to leave the data dir, and an API key that must never
reach it, nor any output, in any JSON spelling (SPEC §13.5): echoed in a verdict, ``\\/``- or
``\\u``-escaped, in a 4xx message. The scans of the hostile export and of each echo are real
processes speaking HTTP; the commands after them that only read or are refused (show, inbox, ids
on the command line) run the real front end's ``main`` in this process (:func:`run_main`): the
same parsing, core, rendering and exit code, without an interpreter start each.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.clock import later
from _fakes.provider import key_leaks, running_fake, u_escaped
from _proc import envelope, run, run_main, write_export
from _rel_harness import ENVELOPE, LONG, TALLY, rig_hooks
from _rel_invariants import files_containing
from _terminal import BIDI, CLEAR, FAKE_ALL_CLEAR, HIDDEN_LINK, TITLE, unsafe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watcher.providers import prompts
from watcher.state import records
from watcher.state import seen
from watcher.config import Paths, load_settings
from watcher.errors import UsageError
from watcher.models import COMMENT_ID_RE, ERROR_KINDS, Comment, InboxRecord, Prompt, SeenFile
from watcher.providers.openai import OpenAIProvider
from watcher.source import read_export
from watcher.store.durable import read_model, write_model
from watcher.store.files import FileStore

# Unique: any file holding it (in any spelling, see key_leaks) leaked the key. The "/" is what a
# server escapes as "\/"; "+" and "=" are in real keys too.
KEY = "sk-RIG/MARKER+7f3a9c="
EXAMPLES = 5000 if LONG else 120  # long lane: ≥ 10,000 bad-input cases in all (two properties × 5000)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Text as it arrives in JSON: anything, including escapes of lone surrogates ("\ud800" is valid
# JSON but no valid Unicode) and the key itself echoed back.
WIRE_TEXT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["\ud800", "x\udfff y", "\ud83d", "</p>\x00", KEY, f"key {KEY} echoed", "", " "]),
)
JUNK = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | WIRE_TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WIRE_TEXT, inner, max_size=3),
                    max_leaves=8)


# ---- model answers --------------------------------------------------------------------------------


def _verdictish() -> st.SearchStrategy[Any]:
    field = {
        "needs_reply": st.one_of(st.booleans(), JUNK),
        "category": st.one_of(st.sampled_from(["question", "praise", "spam", "other"]), JUNK),
        "priority": st.one_of(st.sampled_from(["high", "normal", "low"]), JUNK),
        "summary": st.one_of(WIRE_TEXT.filter(bool), st.text(min_size=270, max_size=300), JUNK),
        "reply_hint": st.one_of(WIRE_TEXT, JUNK),
    }
    return st.fixed_dictionaries({}, optional=field | {"extra": JUNK})


def _content() -> st.SearchStrategy[Any]:
    dumped = _verdictish().map(json.dumps)
    return st.one_of(dumped, dumped.map(lambda t: f"```json\n{t}\n```"), WIRE_TEXT, JUNK)


def _body() -> st.SearchStrategy[Any]:
    choice = st.fixed_dictionaries(
        {"message": st.fixed_dictionaries({"content": _content()}, optional={"refusal": WIRE_TEXT})},
        optional={"finish_reason": st.sampled_from(["stop", "length", "content_filter", None])})
    ok = st.fixed_dictionaries({"choices": st.lists(choice, max_size=2)}, optional={"usage": JUNK})
    error = st.fixed_dictionaries({"error": st.one_of(WIRE_TEXT, st.fixed_dictionaries(
        {}, optional={"message": WIRE_TEXT, "type": WIRE_TEXT, "code": st.one_of(
            st.sampled_from(["insufficient_quota", "rate_limit_exceeded", "invalid_api_key"]), WIRE_TEXT)}))})
    return st.one_of(ok, error, JUNK)


@st.composite
def responses(draw: st.DrawFn) -> tuple[int, dict[str, str], bytes]:
    status = draw(st.sampled_from([200, 200, 200, 400, 401, 403, 404, 429, 500, 503, 529]))
    headers = draw(st.dictionaries(st.just("retry-after"), st.sampled_from(["1", "0.5", "-3", "soon", "1e309"])))
    if draw(st.integers(0, 9)) == 0:
        return status, headers, draw(st.binary(max_size=80))
    ascii_only = draw(st.booleans())
    text = json.dumps(draw(_body()), ensure_ascii=ascii_only)
    # How the server spells the key it echoes: "/" occurs only inside JSON strings, and json.dumps
    # leaves KEY as it is, so both rewrites keep the body the same JSON.
    spelling = draw(st.sampled_from(["plain", "slash", "unicode"]))
    if spelling == "slash":
        text = text.replace("/", "\\/")
    elif spelling == "unicode":
        text = text.replace(KEY, u_escaped(KEY))
    return status, headers, text.encode("utf-8", "surrogatepass")


def _record(tag: str) -> InboxRecord:
    comment = Comment(id="abc123", article_id=1, article_title="T", article_url="https://dev.to/a/t", author="r",
                      created_at="2026-05-14T09:00:00Z", text=f"TAG:{tag} hi", url="https://dev.to/r/comment/abc123")
    return records.new_record(comment, Prompt(template="verdict", template_sha256="0" * 64, system="s", user="u"))


@SETTINGS
@given(answer=responses())
def test_any_model_answer_is_classified_stored_and_read_back(answer: tuple[int, dict[str, str], bytes]) -> None:
    """Whatever the server answers: one verdict or one known error kind, raw kept, saved, key absent."""
    status, headers, body = answer
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        settings_ = load_settings(data_dir=data, env={"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": KEY,
                                                      "WATCHER_BASE_URL": "http://127.0.0.1:9/v1"})
        transport = httpx.MockTransport(lambda request: httpx.Response(status, headers=headers, content=body))
        provider = OpenAIProvider(settings_, transport=transport)
        result = provider.complete(_record("x").prompt)
        assert (result.verdict is None) != (result.error is None)
        assert result.error is None or result.error.kind in ERROR_KINDS
        assert result.raw is not None  # a response arrived: its body is kept
        reserved = records.reserve(_record("x"), command="scan", entrypoint="cli", provider="openai", model="m")
        finished = records.finish(reserved, verdict=result.verdict, error=result.error, raw=result.raw,
                                usage=result.usage, duration_ms=result.duration_ms)
        FileStore(Paths(data)).save_record(finished)  # must not raise: the answer is kept (SPEC §1.2)
        again = FileStore(Paths(data)).load_record("abc123")
        assert again is not None and len(again.attempts) == 1 and again.attempts[0].outcome is not None
        assert files_containing(data, KEY.encode()) == [] and _leaked(data) == []
        said = [result.raw, result.error.message if result.error else ""]
        said += [result.verdict.summary, result.verdict.reply_hint] if result.verdict else []
        assert not any(key_leaks(text or "", KEY) for text in said)
    TALLY.add("bad_inputs")


def _leaked(root: Path) -> list[str]:
    """Files under ``root`` that hold the key in any JSON spelling, at any depth of escaping."""
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and key_leaks(p.read_bytes().decode("utf-8", "replace"), KEY)]


# ---- Forem payloads ----------------------------------------------------------------------------------

HOSTILE_IDS = ["../../escape", "..", ".", "a/b", "ABC", "x" * 17, "ok\x00", "%2e%2e%2f", "", "inbox/../x",
               "/etc/passwd", "c:\\x", "abc ", "ab\ncd"]


def _comment_node() -> st.SearchStrategy[Any]:
    good_id = st.from_regex(r"\A[a-z0-9]{1,16}\Z")
    node = st.fixed_dictionaries(
        {"id_code": st.one_of(good_id, st.sampled_from(HOSTILE_IDS), JUNK)},
        optional={
            "type_of": st.just("comment"),
            "created_at": st.one_of(st.just("2026-05-14T09:00:00Z"), WIRE_TEXT, JUNK),
            "body_html": st.one_of(WIRE_TEXT.map(lambda t: f"<p>{t}</p>"), st.just("<p>[deleted]</p>"), JUNK),
            "user": st.one_of(st.fixed_dictionaries({"username": st.one_of(WIRE_TEXT, JUNK)},
                                                    optional={"name": WIRE_TEXT}), JUNK),
        })
    return st.recursive(node, lambda kids: node.map(lambda n: n) | st.builds(
        lambda n, c: {**n, "children": c}, node, st.lists(kids, max_size=2)), max_leaves=5)


def _export() -> st.SearchStrategy[Any]:
    article = st.fixed_dictionaries(
        {"id": st.one_of(st.integers(1, 99), JUNK)},
        optional={"title": st.one_of(WIRE_TEXT, JUNK), "url": st.one_of(st.just("https://dev.to/a/t"), JUNK),
                  "comments_count": st.one_of(st.integers(0, 9), JUNK),
                  "comments": st.one_of(st.lists(_comment_node(), max_size=4), JUNK)})
    return st.fixed_dictionaries({"articles": st.lists(article, max_size=3)},
                                 optional={"username": st.one_of(WIRE_TEXT, JUNK)})


@SETTINGS
@given(doc=_export())
def test_any_forem_payload_yields_safe_comments_that_store(doc: Any) -> None:
    """Any export: UsageError or safe comments (valid ids) that survive the durable write; never a crash."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        source = Path(tmp) / "export.json"
        source.write_bytes(json.dumps(doc, ensure_ascii=True).encode())
        settings_ = load_settings(data_dir=data, env={})
        try:
            fetched = read_export(source, settings_)
        except UsageError:
            TALLY.add("bad_inputs")
            return
        paths = Paths(data)
        for comment in fetched.comments:
            assert COMMENT_ID_RE.match(comment.id)
            parent = fetched.parent_texts.get(comment.parent_id) if comment.parent_id else None
            FileStore(paths).save_record(records.new_record(comment, prompts.render(comment, parent_text=parent)))
            assert FileStore(paths).load_record(comment.id) is not None
        index = SeenFile()
        for article in fetched.articles:
            index = seen.record_article(index, article.id, title=article.title, url=article.url,
                                        comments_count=article.comments_count)
        write_model(paths.seen, index)
        assert read_model(paths.seen, SeenFile, quarantine_dir=paths.quarantine) is not None
        for rejection in fetched.rejected:
            # an id when it is safe, else a description ("article 1, comment #2"): never a path
            assert rejection.item is None or not any(c in rejection.item for c in ("/", "\\", "\x00", ".."))
        stray = [p for p in Path(tmp).rglob("*") if p.is_file() and data not in p.parents and p != source]
        assert stray == []
    TALLY.add("bad_inputs")


# ---- the front ends: ids that try to leave the data dir, and the key ------------------------------------


def _hostile_export(path: Path) -> Path:
    doc = json.loads(write_export(path, ["good1"]).read_text())
    for i, bad in enumerate(HOSTILE_IDS):
        doc["articles"][0]["comments"].append({**doc["articles"][0]["comments"][0], "id_code": bad,
                                               "created_at": f"2026-05-14T10:{i:02d}:00Z"})
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["cli", "bridge"])
def test_ids_that_try_to_escape_the_data_dir_are_rejected(entry: str, tmp_path: Path) -> None:
    """Hostile id_codes are rejected item by item; hostile ids on the command line exit 2; nothing escapes."""
    box = tmp_path / "box"
    data = box / "data"
    export = _hostile_export(tmp_path / "export.json")
    with running_fake() as fake:
        scan = run(entry, "scan", "--source", str(export), "--json", data_dir=data, env=fake.env())
        assert scan.returncode == 0, scan.stderr
        doc = envelope(scan)["result"]
        assert [i["id"] for i in doc["items"]] == ["good1"]
        assert len(doc["rejected"]) == len(HOSTILE_IDS)
        hostile = (["show", "../seen"], ["mark", "../../x", "replied"], ["recheck", "a/b"], ["show", ".."],
                   ["mark", "ABC", "ignored"], ["recheck", "x" * 17])
        # In process, one after another: each is refused before it touches anything.
        procs = [run_main(entry, *args, "--json", data_dir=data, env=fake.env()) for args in hostile]
        for args, proc in zip(hostile, procs, strict=True):
            assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
            TALLY.add("bad_inputs")
    assert sorted(p.name for p in (data / "inbox").iterdir()) == ["good1.json"]
    assert sorted(p.name for p in box.iterdir()) == ["data"]


# The 429 last: its cooldown would hold back every scan after it. Each scan runs an hour after the
# one before (as cron might, and as far as the provider state can tell), so a breaker that allows
# one real attempt an hour (the 400) lets the next comment be tried.
BEHAVIOURS = ["echo-key-401", "malformed", "529", "invalid", "401", "verdict", "echo-key-summary",
              "echo-key-escaped", "echo-key-unicode", "echo-key-400", "429:1"]


def test_api_key_never_reaches_the_data_dir(tmp_path: Path) -> None:
    """Runs meeting 401 (with the key echoed back), 429, malformed, 529…: the key is in no file."""
    data = tmp_path / "rig"
    labels = [f"k{i}" for i in range(len(BEHAVIOURS))]
    export = write_export(tmp_path / "export.json", labels)
    with running_fake() as fake:
        env = {**fake.env(), "WATCHER_API_KEY": KEY}
        for label, behaviour in zip(labels, BEHAVIOURS, strict=True):
            fake.script(label, behaviour)
        outputs: list[subprocess.CompletedProcess[str]] = []
        for i in range(len(labels)):  # one new comment per scan; then a recheck of the failures
            hooks = rig_hooks(clock=later(timedelta(hours=i)))
            entry = "cli" if i % 2 else "bridge"
            outputs.append(run_main(entry, "scan", "--source", str(export), "--limit", "1", *ENVELOPE[entry],
                                    data_dir=data, env=env, hooks=hooks))
            outputs.append(run_main("cli", "recheck", "--limit", "1", "--json", data_dir=data, env=env,
                                    hooks=hooks))
            TALLY.add("bad_inputs")
        for entry in ("cli", "bridge"):
            proc = run(entry, "recheck", "--json", data_dir=data, env=env)
            outputs.append(proc)
            assert KEY not in proc.stdout + proc.stderr
        assert set(fake.calls) == set(labels)
    echoed = FileStore(Paths(data)).load_record("k0")
    assert echoed is not None and "[redacted]" in (echoed.attempts[0].raw or "")  # it did come back
    assert files_containing(data, KEY.encode()) == [] and _leaked(data) == []
    assert all(not key_leaks(o.stdout + o.stderr, KEY) for o in outputs)


ECHOES = ["echo-key-summary", "echo-key-escaped", "echo-key-unicode", "echo-key-400", "echo-key-401"]
# What a person reads afterwards. Wide, so no table wraps a key across lines and hides it.
READS = [("cli", ("show", "echo1")), ("cli", ("show", "echo1", "--json")), ("cli", ("inbox", "--all")),
         ("cli", ("inbox", "--all", "--json")), ("bridge", ("show", "echo1")), ("bridge", ("inbox", "--all"))]


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ECHOES)
def test_an_echoed_key_is_in_no_file_and_no_output(behaviour: str, tmp_path: Path) -> None:
    """A server echoing the key (in a verdict, \\/- or \\u-escaped, in a 4xx message): a real scan
    (a process) through the loopback, then show and inbox (the front ends' ``main`` in process);
    the key is in no file and no output, in any spelling."""
    data = tmp_path / "data"
    export = write_export(tmp_path / "export.json", ["echo1"])
    with running_fake() as fake:
        env = {**fake.env(), "WATCHER_API_KEY": KEY, "COLUMNS": "500"}
        fake.script("echo1", behaviour)
        procs = [run("cli", "scan", "--source", str(export), data_dir=data, env=env)]
        # The reads in process: the real front end and its rendering, COLUMNS included.
        procs += [run_main(entry, *args, data_dir=data, env=env) for entry, args in READS]
        assert fake.calls == ["echo1"]
    record = FileStore(Paths(data)).load_record("echo1")
    assert record is not None and "[redacted]" in (record.attempts[0].raw or "")  # it did come back
    if behaviour not in ("echo-key-400", "echo-key-401"):
        assert record.verdict is not None and "[redacted]" in record.verdict.summary
        assert "[redacted]" in procs[1].stdout  # show prints the redacted summary
    assert files_containing(data, KEY.encode()) == [] and _leaked(data) == []
    for proc in procs:
        assert proc.returncode in (0, 2), (proc.args, proc.stderr)
        assert not key_leaks(proc.stdout + proc.stderr, KEY), proc.args
    TALLY.add("bad_inputs", len(procs))


# ---- what a person reads: escape sequences from outside, in every human view (SPEC §15.5) ---------

# The red team's sequences, and hypothesis's own text over the whole control and bidi range, in any mix.
_ESCAPE_PARTS = [TITLE, CLEAR, FAKE_ALL_CLEAR, HIDDEN_LINK, BIDI, "\x9b2J", "\r", "\r\n", "\n", "\t", "\x00",
                 "\x7f", "\u0085", "\u2028", "\ufeff", "\U000e0041"]
_CONTROLISH = st.characters(min_codepoint=0, max_codepoint=0x9F) | st.sampled_from(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
OUTSIDE_TEXT = st.lists(st.one_of(st.sampled_from(_ESCAPE_PARTS), st.text(_CONTROLISH, max_size=6),
                                  st.text(max_size=8)), min_size=1, max_size=8).map("".join)


def _views(t: str) -> list[tuple[str, Any]]:
    """One result per human view, every outside string in it set to ``t``."""
    from watcher.models import Attempt, AttemptError, Breaker, Verdict
    from watcher.commands.results import (
        AgentClaims,
        BatchResult,
        CheckResult,
        CheckRow,
        ClaimResult,
        CommentRecord,
        DemoResult,
        InboxEntry,
        InboxResult,
        ItemResult,
        ItemVerdict,
        PublicSettings,
        SignalsResult,
        StatusPaths,
        StatusResult,
        StatusSignals,
        SubmitResult,
    )

    verdict = Verdict(needs_reply=True, category="question", priority="high", summary=(t or "x")[:280],
                      reply_hint=t[:500])
    comment = Comment(id="evil1", article_id=1, article_title=t, article_url=t, author=t,
                      created_at="2026-05-14T09:00:00Z", text=t, url=t)
    error = AttemptError(kind="malformed_json", message=t)
    attempt = Attempt(n=1, reserved_at="2026-05-14T09:00:00Z", command="scan", entrypoint="cli", pid=1,
                      provider="openai", model=t, outcome="error", error=error, raw=t)
    batch = BatchResult("scan", limit=5, provider="openai", model=t)
    batch.items = [ItemResult("evil1", "verdict", attempts=1, verdict=ItemVerdict.of(verdict)),
                   ItemResult("evil2", "error", kind="malformed_json", message=t, attempts=1),
                   ItemResult("evil3", "error", message=t)]
    entry = InboxEntry(id="evil1", state="done", triage="open", attempts=1, author=t, article=t, url=t,
                       created_at="2026-05-14T09:00:00Z", verdict=verdict, verdict_by="openai", hint=None)
    missing = entry.model_copy(update={"id": "evil2", "state": "failed", "verdict": None, "verdict_by": None})
    inbox = InboxResult(all=False, new=False, count=1, comments=[entry], unresolved={"failed": 1})
    record = CommentRecord(schema_version=1, comment=comment, prompt=None, cap=3, attempts=[attempt],
                           verdict=verdict, grants=[], baseline=False, state="done", verdict_by="openai",
                           hint=None, triage="open", triage_by=None, replied_at=None)
    settings = PublicSettings(data_dir="/d", provider="openai", model=t, base_url=t, api_key_set=True, timeout_s=60,
                              parallel=1, offline=False, provider_defaulted=False, devto_username=t,
                              devto_api_key_set=False, devto_base_url=t)
    status = StatusResult(comments=1, articles=1, states={"done": 1}, triage={"open": 1}, cooldown=None,
                          breaker=Breaker(kind="auth", message=t, since="2026-05-14T09:00:00Z", provider="openai",
                                          model=t, base_url=t),
                          claimed=AgentClaims(in_flight=0, earliest_lease_until=None, lease_ended=0),
                          signals=StatusSignals(counts={t: 1}, invalid=0), settings=settings,
                          paths=StatusPaths(data_dir="/d", inbox="/d/i", seen="/d/s", observations="/d/o"))
    return [
        ("scan", batch),
        ("inbox", inbox),
        ("inbox", inbox.model_copy(update={"all": True, "comments": [entry, missing], "count": 2})),
        ("show", record),
        ("status", status),
        ("check", CheckResult(ok=False, checks=[CheckRow(name="provider", ok=False, detail=t, fix=t)])),
        ("claim", ClaimResult(provider="agent", lease_minutes=15, claimed=[], remaining=0, calls=0,
                              items=[ItemResult("evil2", "interrupted", message=t)])),
        ("submit", SubmitResult(id="evil1", n=1, outcome="error", kind="invalid_verdict", message=t, attempts=1,
                                attempts_left=2, state="failed", verdict=None)),
        ("submit", SubmitResult(id="evil1", n=1, outcome="verdict", kind=None, message=None, attempts=1,
                                attempts_left=2, state="done", verdict=verdict)),
        ("signals", SignalsResult(reset=False, counts={t: 2}, invalid=1, applied=10, new_lines=1)),
        ("demo", DemoResult(data_dir="/d", scans=[batch], inbox=inbox)),
    ]


@SETTINGS
@given(text=OUTSIDE_TEXT)
def test_no_human_view_passes_a_raw_control_character_to_the_terminal(text: str) -> None:
    """Whatever a comment, a name, a title or a model says: every view the CLI prints for a person
    (scan table, inbox, inbox --all, show, status, check, claim, submit, signals, demo) shows its
    control, escape and bidi characters as visible escapes; none reaches the terminal raw."""
    import contextlib
    import io

    from watcher.cli import render

    for command, result in _views(text):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            render.human(command, result, {"kind": "usage", "message": text} if command == "scan" else None)
        assert unsafe(out.getvalue()) == [], (command, text)
    TALLY.add("bad_inputs")
