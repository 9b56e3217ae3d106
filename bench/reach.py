"""Whether news reaches the author in time, and what an idle ``watch`` costs dev.to (SPEC §16).

Both run a real ``watcher watch --every 1m`` process (offline provider, a temp data dir) against
real loopback servers: the tests' fake Forem (``tests/_fakes/forem.py``, over HTTP) as dev.to and
the tests' HTTP receiver (``tests/_receivers.py``) as an Apprise ``json://`` target. Nothing is
injected: the process sees only ``DEVTO_BASE_URL``, ``DEVTO_USERNAME`` and ``WATCHER_NOTIFY``.

``reach``: a warm-up comment is posted as ``watch`` starts and its message awaited (the first
round, and proof the chain works before minutes are spent). Then 20 comments are posted, one at
a seeded random moment of each 18 s slot of 360 s: six rounds' worth, so every phase of the
round cycle is sampled about equally, and at most 5 comments fall in any 68 s, the longest a
round period gets (66 s of wait + its own 2 s). That keeps each round within watch's default
``--limit 5`` model calls (SPEC §7): a burst of more new comments than that in one interval
leaves the rest for the next round, one round per 5 more (8 comments at once: 5 in the first
message, 3 in the next), which is the cap doing its job, not the time this figure guards; the
row counts any comment that missed its round and is a MISS if one did. A comment's time runs
from the moment the fake serves it to the moment a message naming its link arrives; the target
is the interval + 10 s, 70 s. A comment waits for the next round's listing, so the expectation
is uniform over one round period plus the round's own time from listing to send (~2 s): p50 ≈
32 s, p95 ≈ 60 s when rounds keep time.

``reach.model``: the same with the tests' loopback provider answering each call in 4 s, 4 calls
at once, as a hosted model does: a round then takes ~10 s from listing to send, and only an
interval kept from one round's start to the next keeps that from adding to every wait.

``idle``: three articles whose comments the first round takes in, then rounds with nothing new.
A round starts with the listing's first page; every request until the next round's is counted
against it. With ``last_comment_at`` unchanged a round reads the listing only: its page and the
empty page that ends it, 2 requests.
"""

from __future__ import annotations

import itertools
import random
import re
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import BIN, Row, clean_env, temp_dir
from _fakes.forem import FakeForem, serving_forem
from _receivers import HttpReceiver, Received

INTERVAL_S = 60  # watch --every 1m, the shortest interval watch allows
TARGET_S = INTERVAL_S + 10  # SPEC §16.1–16.2: news reaches the author within the interval + 10 s
COMMENTS = 20
WINDOW_S = 360.0
# watch's default --limit: model calls per round (SPEC §7). New comments past it in one round wait
# for the next; the posting rate keeps every round within it (see the module's docstring).
ROUND_CAP = 5
IDLE_ROUNDS = 4
MODEL_S = 4.0  # reach.model: a hosted model's answer to a comment-sized prompt takes seconds
SEED = 1602
AUTHOR = "maya_writes"
_LINKED = re.compile(r"/comment/([0-9a-z]+)")
QUESTIONS = (
    "does the cache in your second example survive a restart of the worker?",
    "would this work behind a corporate proxy, or do you need the env variable too?",
    "how did you pick the batch size you mention in the benchmarks section?",
    "is there a reason you went with polling here instead of webhooks?",
)


@dataclass
class LockedForem(FakeForem):
    """The fake Forem, changed by the bench while its server thread answers ``watch``: one lock
    around both, so a listing never sees half a comment."""

    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(
        self, path: str, query: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            return super().answer(path, query, headers)

    def post(self, article_id: int, text: str) -> tuple[str, float]:
        """A new comment stamped with the real time; its id_code and the moment it became
        visible (``time.monotonic``, the clock of the request log and the arrivals)."""
        with self.lock:
            self.now = datetime.now(UTC).replace(microsecond=0)
            return self.comment(article_id, "priyan", text), time.monotonic()


class Arrivals(list[Received]):
    """The receiver's list of requests, each one's arrival time kept beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def append(self, item: Received) -> None:
        self.at.append(time.monotonic())
        super().append(item)


@dataclass
class Watch:
    """A running ``watcher watch --every 1m`` with its fake dev.to and its receiver."""

    forem: LockedForem
    receiver: HttpReceiver
    arrivals: Arrivals
    proc: subprocess.Popen[bytes]
    logs: Path

    def arrived(self, id_code: str) -> float | None:
        """When the first message naming this comment's link arrived, if one has."""
        with self.receiver.lock:
            pairs = list(zip(self.arrivals.at, self.arrivals, strict=True))
        return next((at for at, got in pairs if id_code in comments_named(got)), None)

    def round_starts(self) -> list[float]:
        """A round's dev.to part starts with the listing's first page."""
        with self.forem.lock:
            return [
                r.at
                for r in self.forem.requests
                if r.path == "/api/articles" and r.query.get("page") == "1"
            ]

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.proc.poll() is not None:
                raise RuntimeError(f"watch exited {self.proc.returncode}: {self.stderr()[-800:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not in {timeout:.0f} s; {self.stderr()[-800:]}")
            time.sleep(0.05)

    def stderr(self) -> str:
        return (self.logs / "stderr").read_text(errors="replace")


def comments_named(got: Received) -> set[str]:
    """The id_codes of the comments whose links (``…/comment/<id_code>``) a message holds."""
    payload = got.json()
    text = " ".join(str(v) for v in payload.values()) if isinstance(payload, dict) else str(payload)
    return set(_LINKED.findall(text))


@contextmanager
def watching(base: Path | None, forem: LockedForem, label: str, **extra: str) -> Iterator[Watch]:
    """``watch --every 1m`` on a temp data dir against ``forem`` (the offline provider unless
    ``extra`` says otherwise), delivering to a fresh receiver; stopped with SIGTERM afterwards."""
    arrivals = Arrivals()
    receiver = HttpReceiver(got=arrivals).start()
    with temp_dir(base, label) as root, serving_forem(forem) as base_url:
        forem.site = base_url.removesuffix("/api")
        setup = {
            "NO_COLOR": "1",
            "WATCHER_PROVIDER": "offline",
            "DEVTO_USERNAME": AUTHOR,
            "DEVTO_BASE_URL": base_url,
            "WATCHER_NOTIFY": f"json://127.0.0.1:{receiver.port}/hook",
        }
        env = clean_env(root / "data", **{**setup, **extra})
        out, err = (root / "stdout").open("wb"), (root / "stderr").open("wb")
        argv = [str(BIN / "watcher"), "watch", "--every", f"{INTERVAL_S // 60}m"]
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        try:
            yield Watch(forem, receiver, arrivals, proc, root)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.close()
            err.close()
            receiver.stop()


def _world() -> tuple[LockedForem, list[int]]:
    forem = LockedForem(step=timedelta(0))
    forem.now = datetime.now(UTC) - timedelta(hours=1)
    return forem, [forem.publish(AUTHOR, f"Post {n}") for n in range(3)]


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (``statistics.quantiles``' inclusive method)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]


def _periods(starts: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(starts)]


def run_reach(base: Path | None, *, quick: bool) -> list[Row]:
    return [_reach(base, quick, "reach", "offline provider")]


def run_reach_model(base: Path | None, *, quick: bool) -> list[Row]:
    from _fakes.provider import running_fake

    with running_fake() as fake:
        fake.default, fake.slow_s = "slow", MODEL_S
        # As for a hosted provider, whose default is 4 calls at once (SPEC §15.1).
        setup = {**fake.env(), "WATCHER_PARALLEL": "4"}
        title = f"a model answering in {MODEL_S:.0f} s, 4 calls at once"
        return [_reach(base, quick, "reach.model", title, **setup)]


def _reach(base: Path | None, quick: bool, figure: str, provider: str, **extra: str) -> Row:
    n, window = (4, 72.0) if quick else (COMMENTS, WINDOW_S)
    rng = random.Random(SEED)
    forem, articles = _world()
    slot = window / n  # one comment at a random moment of each slot: at most 5 in any 68 s
    plan = [(k * slot + rng.uniform(0, slot), rng.choice(articles)) for k in range(n)]
    posted: list[tuple[str, float]] = []
    with watching(base, forem, figure, **extra) as w:
        warm, _ = forem.post(articles[0], f"Warm-up: {QUESTIONS[0]}")
        w.wait(lambda: w.arrived(warm) is not None, 120, "the warm-up comment's message")
        start = time.monotonic()
        for k, (offset, article) in enumerate(plan):
            time.sleep(max(0.0, start + offset - time.monotonic()))
            posted.append(forem.post(article, f"Q{k}: {QUESTIONS[k % len(QUESTIONS)]}"))
        w.wait(
            lambda: all(w.arrived(c) is not None for c, _ in posted),
            TARGET_S * 3,
            "every comment's message",
        )
        delays = [(w.arrived(c) or 0.0) - at for c, at in posted]
        every_start = w.round_starts()
        starts = [s for s in every_start if s >= start - INTERVAL_S]
        messages = len(w.arrivals)
        # Each message after the warm-up's, from its round's first listing request.
        legs = [at - max(s for s in every_start if s <= at) for at in w.arrivals.at[1:]]
        per_message = [len(comments_named(got)) for got in w.arrivals[1:]]
        arrived = [(at, w.arrived(c) or 0.0) for c, at in posted]
        problems = [line for line in w.stderr().splitlines() if "Traceback" in line]
    # A comment whose message came after a second round had begun missed the first round after
    # it appeared: the round cap, or a round that found news and left it to the next.
    late = sum(1 for at, got in arrived if sum(at < s < got for s in every_start) >= 2)
    p50, p95, worst = _percentile(delays, 0.5), _percentile(delays, 0.95), max(delays)
    periods = _periods(starts)
    notes = [
        (
            f"{n} comments at seeded moments (seed {SEED}) over {window:.0f} s; delays "
            f"{' '.join(f'{d:.0f}' for d in sorted(delays))} s"
        ),
        (
            f"worst {worst:.1f} s; {messages} messages in all (one per round with news, the "
            f"warm-up's included); comments per message {' '.join(map(str, per_message))} "
            f"(the round cap, watch's default --limit, is {ROUND_CAP})"
        ),
        f"comments that missed the first round after they appeared: {late}",
        (
            f"round starts apart: median {statistics.median(periods):.1f} s, longest "
            f"{max(periods):.1f} s (--every 1m: 54-66 s start to start, jittered ±10 %)"
            if periods
            else "fewer than two rounds seen"
        ),
        (
            f"a round's listing to its message at the receiver: median "
            f"{statistics.median(legs):.1f} s, longest {max(legs):.1f} s"
        ),
        *problems,
    ]
    return Row(
        figure,
        f"comment on dev.to -> message at the receiver, watch --every 1m, {n} comments, {provider}",
        f"p50 {p50:.1f} s · p95 {p95:.1f} s",
        f"{TARGET_S} s (interval + 10 s)",
        p95 / TARGET_S,
        "p95 ≤ 1.00×",
        p95 <= TARGET_S and not problems and late == 0,
        notes,
    )


def run_idle(base: Path | None, *, quick: bool) -> list[Row]:
    rounds = 1 if quick else IDLE_ROUNDS
    forem, articles = _world()
    for article in articles:
        forem.comment(article, "priyan", f"Old one: {QUESTIONS[1]}")
    with watching(base, forem, "idle") as w:
        # The first round takes in every article's thread; the next `rounds` have nothing new.
        w.wait(
            lambda: len(w.round_starts()) >= rounds + 1, INTERVAL_S * 1.2 * (rounds + 1), "rounds"
        )
        time.sleep(10)  # the last idle round's requests come in its first seconds
        with forem.lock:
            log = [(r.at, r.path) for r in forem.requests]
        starts = w.round_starts()[: rounds + 1]
    bounds = [*starts, float("inf")]
    per_round = [
        sum(1 for at, _ in log if bounds[i] <= at < bounds[i + 1]) for i in range(len(starts))
    ]
    idle = per_round[1:]
    mean = statistics.mean(idle)
    period = statistics.median(_periods(starts)) if len(starts) > 1 else float(INTERVAL_S)
    hourly = mean * 3600 / period
    first_paths = sorted({p for at, p in log if at < bounds[1]})
    return [
        Row(
            "idle",
            f"dev.to requests per idle round, watch --every 1m, {rounds} idle rounds",
            f"{mean:.2f} per round ({hourly:.0f} per hour)",
            f"2 per round ({2 * 3600 / period:.0f} per hour at one round per {period:.0f} s)",
            mean / 2,
            "≤ 1.00× (listing page + the empty page that ends it)",
            max(idle) <= 2,
            [
                (
                    f"per round: first {per_round[0]} (takes in {len(articles)} threads), then "
                    f"{' '.join(map(str, idle))}"
                ),
                f"first round's paths: {', '.join(first_paths)}",
            ],
        )
    ]
