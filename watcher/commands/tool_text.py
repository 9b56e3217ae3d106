"""What an agent reads about each MCP tool: its description, with the exit codes it can return and
what to do about each.

The meaning of each exit code is :data:`watcher.errors.EXIT_CODES` (the output schema's
``exit_code`` quotes it); what an agent should *do* with it is written here, once, and the server's
instructions (:mod:`bridge.mcp_text`) give every code first. The registry
(:mod:`watcher.commands.registry`) hands each description to its tool.
"""

from __future__ import annotations

from watcher.state.records import LEASE

# SPEC §14: how long a claim waits for its submit (the core's figure, in the words' unit).
LEASE_MINUTES = round(LEASE.total_seconds() / 60)

# What an agent should do with each non-zero exit code (the meanings come from watcher.errors).
AGENT_ADVICE = {
    1: "an internal error: tell the user the message; do not retry.",
    2: (
        "fix the argument, or tell the user to fix the setup the message names; never retry the "
        "call as it is."
    ),
    3: (
        "wait: the message (the cooldown or the breaker) says until when; no scan or recheck "
        "before then."
    ),
    4: "another run holds the lock: try again later (minutes, not seconds); do not loop.",
    5: "a state file is corrupt or could not be saved: tell the user the path the message names.",
}


def on_exit(*codes: int) -> str:
    """The advice for ``codes``, in full, one line each (the server's instructions)."""
    return "\n".join(f"exit_code {code}: {AGENT_ADVICE[code]}" for code in codes)


def codes(*returned: int) -> str:
    """A tool's closing line: the codes it can return, whose advice the instructions give."""
    return f"exit_code {', '.join(map(str, returned))}: see instructions."


# What the model reads of every tool on every session is kept short (tests/test_mcp_startup.py
# holds descriptions and input schemas to 6,000 bytes): the instructions hold each code's advice,
# so a description names its codes and repeats only what a spending tool must not get wrong; what
# an argument's own description says (`limit`, `all`, `reset`) is not said again.
SPENDING = """exit_code 2: fix the setup; never retry as is. exit_code 3: wait until when it
says. exit_code 4: try again later, do not loop. 5: see instructions."""

SCAN = f"""Fetch new comments (dev.to or an export file); make each one's FIRST model attempt, up
to `limit` (the rest wait: `remaining`). Spends attempts (3 per comment, ever); retries are
`recheck`. Provider agent: only records them for `claim`.
{SPENDING}"""

RECHECK = f"""Retry failed verdicts: never past 3 attempts per comment in total, scan's included.
Never call recheck in a loop: an exhausted comment is the user's to grant. Provider agent: closes
claims past their lease.
{SPENDING}"""

STATUS = f"""Free: comments by state and triage, cooldown, breaker, provider, model, paths. Call
first.
{codes(5)}"""

INBOX = f"""Free: the comments needing a reply, highest priority first, with url, summary,
reply_hint.
{codes(5)}"""

DRAFT = f"""Draft a reply to `id` in the author's voice, for the user to post. Spends 1 of its 3
drafts (and tokens), no attempt.
{codes(2, 3, 4, 5)}"""

SHOW = f"""Free: one comment in full (text, verdict, triage, attempts).
{codes(2, 5)}"""

MARK = f"""Set triage: replied (once the author posted it), ignored, or open. Posts nothing;
answers during a scan: never the pipeline lock.
{codes(2, 4, 5)}"""

CHECK = f"""Free: checks config, keys, model, dev.to user, data dir; each failure says the user's
fix.
{codes(2, 3, 5)}"""

SIGNALS = f"""Count the observation log's new lines (each once): totals per key. reset=true only
if the user says the log was replaced.
{codes(4, 5)}"""

CLAIM = f"""Provider agent only (you are the model): reserves up to `limit` comments, each with
its attempt n, prompt and verdict schema. EACH CLAIM SPENDS ONE OF THE COMMENT'S 3 ATTEMPTS,
submitted or not: claim only what you judge now; submit within {LEASE_MINUTES} minutes.
{codes(2, 4, 5)}"""

SUBMIT = f"""Provider agent: store your verdict for attempt `n` of `id`. One failing the schema
still counts (claim to retry). A late, repeated or unclaimed submit is refused (exit_code 2): do
not resend.
{codes(2, 4, 5)}"""

EVAL = f"""Free: stored verdicts vs what the author did (replied or ignored), per provider, model,
prompt version.
{codes(2, 5)}"""

USAGE = f"""Free: the month's model calls (drafts too) and tokens per provider and model, by day;
dollars per WATCHER_PRICES.
{codes(2, 5)}"""

SAMPLE_REFUSED = (
    "source 'sample' is the bundled demo: its comments would go to the demo's own data dir, "
    "where inbox and show never look. Ask the user to run `watcher demo` in a terminal to see "
    "it; to triage real comments, omit source (dev.to) or pass an export file's path."
)

ARTICLES = f"""Free: per article: title, link, comments, how many need a reply, oldest waiting,
last activity.
{codes(5)}"""
