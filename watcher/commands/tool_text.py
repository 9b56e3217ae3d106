"""What an agent reads about each MCP tool: its description, with the exit codes it can return and
what to do about each.

The meaning of each exit code is :data:`watcher.errors.EXIT_CODES` (the output schema's
``exit_code`` quotes it); what an agent should *do* with it is written here, once, and the server's
instructions (:mod:`bridge.mcp_text`) give every code first. The registry
(:mod:`watcher.commands.registry`) hands each description to its tool.
"""

from __future__ import annotations

from watcher.pipeline import DEFAULT_LIMIT, MAX_LIMIT
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
    """The advice for ``codes``, as the closing lines of a tool description."""
    return "\n".join(f"exit_code {code}: {AGENT_ADVICE[code]}" for code in codes)


SCAN = f"""Fetch new comments from dev.to (or an export file) and make the FIRST model attempt for
each comment never attempted before — at most `limit` model calls this run (default {DEFAULT_LIMIT},
max {MAX_LIMIT}); comments beyond the limit are left pending for the next scan (`remaining`). Spends
model attempts (3 per comment in total, ever; scan makes only the first). Never retries failures:
that is `recheck`. Waits at most 5 s for the pipeline lock. With a progress token, sends progress
after planning (total = calls planned) and after each model call. A setup failure (unreachable
server, rejected key, unknown model, refused request) or a rate limit stops the batch at once; a
broken provider is then probed for free before any attempt is spent. Use dry_run to see what would
be called without spending anything. The result is the batch summary, also on a non-zero exit_code.
With provider agent, scan makes no model call and spends nothing: it records the new comments and
`for_agent` says how many wait for `claim`.
{on_exit(2, 3, 4, 5)}"""

RECHECK = f"""Retry comments whose verdict failed (malformed answer, overload, timeout, …) with
their cached prompt. Spends model attempts: at most `limit` calls this run (default {DEFAULT_LIMIT},
max {MAX_LIMIT}), one per comment per run, and never more than 3 attempts per comment in total, the
scan's first attempt included — an exhausted comment is never called again. Does not fetch new
comments (that is `scan`). Waits at most 5 s for the pipeline lock. With a progress token, sends
progress like scan. Never call recheck in a loop: a comment that failed three times is exhausted and
only the user can grant it more attempts (`watcher grant`, not available to agents). Use dry_run to
see what would be called. With provider agent, recheck makes no model call: it closes claims left
open past their lease.
{on_exit(2, 3, 4, 5)}"""

STATUS = f"""Free: no model call, no network, no lock wait. Counts comments by state (done, pending,
failed, exhausted, reserved, baseline, answered) and triage, shows any provider cooldown or open
breaker (and until when), observation signal counts, the configured provider and model, and the data
paths. Call this first.
{on_exit(5)}"""

INBOX = f"""Free: the comments that need a reply (their verdict says so and they are not marked
replied or ignored), highest priority first, each with its url and the verdict's summary and
reply_hint. all=true lists every known comment with its state instead. Same data as the resource
watcher://inbox.
{on_exit(5)}"""

SHOW = f"""Free: one comment in full — its text, verdict (with reply_hint), triage and every model
attempt (outcome, error, raw answer). The cached prompt sent to the model is left out unless
prompt=true. Same data as the resource watcher://comment/{{id}}.
{on_exit(2, 5)}"""

MARK = f"""Set a comment's triage: replied (only once the author says the reply is posted), ignored
(it needs no answer), or open again. No model call; posts nothing. Takes only the short seen.json
lock, never the pipeline lock, so it answers at once even while a scan or recheck runs, and that
batch will not overwrite the mark. Marking the same way twice changes nothing. more_ids marks
several at once.
{on_exit(2, 4, 5)}"""

CHECK = f"""Free: checks the setup without spending an attempt or a token — config, API key present,
the provider's models endpoint (does the model exist?), the dev.to user, the data dir. Each failed
check says its fix, for the user to apply. exit_code 0 only if all pass. Use it after a scan or
recheck stopped with exit_code 2 or 3.
{on_exit(2, 3, 5)}"""

SIGNALS = f"""Count the new lines of the observation log (each exactly once, across crashes) and
return the totals per key. No model call. reset=true recounts the whole log from the start: only
when the user says the log was replaced or truncated on purpose.
{on_exit(4, 5)}"""

CLAIM = f"""Agent mode only (provider agent, WATCHER_PROVIDER=agent): you are the model. Reserves up
to `limit` comments for you to judge (default {DEFAULT_LIMIT}, max {MAX_LIMIT}) — those scan would
call first and those recheck would retry, oldest first — and returns each with its attempt number n,
its cached prompt (system, user) and the verdict's JSON schema. EACH CLAIM SPENDS ONE OF THE
COMMENT'S 3 ATTEMPTS, at once and for good, whether or not you submit: claim only what you will
judge now. Submit each verdict within {LEASE_MINUTES} minutes (lease_until); after that the next run
closes the attempt as interrupted, still counted. `items` lists comments met but not claimed
(deferred: claimed elsewhere and still in its lease; interrupted: an abandoned claim closed now,
claimable next time; exhausted: no attempt left). No model call, no network; waits at most 5 s for
the pipeline lock.
{on_exit(2, 4, 5)}"""

SUBMIT = f"""Agent mode: store your verdict for attempt `n` of comment `id`, exactly as claim
returned them. `verdict` is a JSON object that fits the schema claim returned (needs_reply,
category, priority, summary, reply_hint, nothing else); a JSON string of that object is accepted
too. A valid verdict is saved as the comment's verdict (outcome verdict). A verdict that fails the
schema is recorded as the error invalid_verdict and COUNTS as the attempt (exit_code 0, outcome
error; attempts_left says what the comment has left): the claim is closed, so claim the comment
again to try once more. Submit within {LEASE_MINUTES} minutes of the claim. A late or repeated
submit, or one for an attempt that is not an open agent claim, is refused with exit_code 2 (kind
submit_refused) and changes nothing: do not send it again. Waits at most 5 s for the pipeline lock.
{on_exit(2, 4, 5)}"""

EVAL = f"""Free and read-only: how good the stored verdicts are, judged by what the author did —
replied on dev.to or marked replied (the comment needed a reply), marked ignored (it did not). Per
provider, model and prompt version: judged, agreement, precision and recall of needs_reply, the
confusion counts, and the disagreements with their ids and summaries (the comments to look at with
show). Comments the author has not replied to or marked are counted as unlabelled, never guessed.
since (a date like 2026-11-01): only comments created then or later. No model call; writes nothing.
The labelled set (`watcher eval --set`) is for the person, in a terminal.
{on_exit(2, 5)}"""

SAMPLE_REFUSED = (
    "source 'sample' is the bundled demo: its comments would go to the demo's own data dir, "
    "where inbox and show never look. Ask the user to run `watcher demo` in a terminal to see "
    "it; to triage real comments, omit source (dev.to) or pass an export file's path."
)

ARTICLES = f"""Free: per article its title and link, comments, how many need a reply, the oldest one
waiting (its age in days) and the last activity — what waits longest first. Reads the data directory
only.
{on_exit(5)}"""
