"""SPEC §16.6: an outage costs one attempt, with parallel calls too.

Each outage (tests/_outage.py) is played with ``--parallel`` 1, 4 and 8 against the loopback
recording fake, whose models endpoint keeps saying yes: cron rounds of ``scan`` then ``recheck``
at 0 s, 10 s, 30 min and 60 min of the outage, with the injected clock. The call log and the
inbox files must show the invariant: one outage, at most one counted attempt per stop plus the
half-open calls, and no comment more than one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from _fakes.provider import FakeProvider, running_fake
from _outage import KINDS, TRANSIENT, play

from watcher.config import Paths
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow

ROUNDS = [timedelta(0), timedelta(seconds=10), timedelta(minutes=30), timedelta(minutes=60)]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


@pytest.mark.parametrize("parallel", [1, 4, 8])
@pytest.mark.parametrize("kind", KINDS)
def test_an_outage_costs_one_attempt_per_stop_and_no_comment_more_than_one(
    tmp_path: Path, fake: FakeProvider, kind: str, parallel: int
) -> None:
    """Whatever --parallel says: one request at a time, the first run spends what its stop costs
    (two for a transient kind: the second in a row stops), each later run at most one, and no
    comment spends two attempts in the outage."""
    played = play(
        tmp_path, fake, kind, parallel=parallel, schedule=ROUNDS, outage_until=timedelta(days=1)
    )
    first = 2 if kind in TRANSIENT else 1
    requests = [len(r.requests) for r in played.rounds]
    if kind == "refused":
        assert fake.calls == [] and played.attempts == 0  # no byte sent: nothing counted
        assert played.reserved <= len(ROUNDS)  # reserved all the same, one a run at most
    else:
        assert requests[0] == first, played.rounds
        assert all(n <= 1 for n in requests[1:]), played.rounds
        # A hung request's server thread sleeps on after the deadline cut the client's side.
        assert played.max_active == 1 or kind == "hang"
    assert played.attempts <= first + len(ROUNDS) - 1
    assert max(played.counted.values(), default=0) <= 1, played.counted
    assert all(code != 0 for r in played.rounds for code in r.exits), played.rounds


@pytest.mark.parametrize("kind", ["500", "hang", "drop"])
def test_a_chat_endpoint_failing_behind_a_healthy_models_endpoint_half_opens_once_an_interval(
    tmp_path: Path, fake: FakeProvider, kind: str
) -> None:
    """The models endpoint answers 200 all along and is never asked: after the two-in-a-row stop a
    run 10 s later calls nothing, and each half-open call goes to a comment not yet tried."""
    played = play(
        tmp_path, fake, kind, parallel=4, schedule=ROUNDS, outage_until=timedelta(days=1)
    )
    assert [len(r.requests) for r in played.rounds] == [2, 0, 1, 1]
    assert fake.probes == []
    assert max(Counter(fake.calls).values()) == 1


def test_a_refused_connection_is_recorded_not_sent_and_counts_no_attempt(
    tmp_path: Path, fake: FakeProvider
) -> None:
    """Connection refused: the attempt is reserved on disk before the call and marked not_sent
    after it; the comment keeps all three of its attempts (SPEC §16.3)."""
    play(tmp_path, fake, "refused", parallel=4, schedule=ROUNDS[:1], outage_until=timedelta(1))
    store = FileStore(Paths(tmp_path / "data"))
    record = store.load_record("o00")
    assert record is not None and [a.not_sent for a in record.attempts] == [True]
    assert record.attempts[-1].error is not None
    assert record.attempts[-1].error.kind == "unreachable"


def test_when_the_outage_ends_the_comments_it_touched_are_judged_and_none_is_exhausted(
    tmp_path: Path, fake: FakeProvider
) -> None:
    """A 500 outage over three cron rounds, then the provider answers: the half-open call closes
    the breaker and every comment gets its verdict with attempts to spare."""
    schedule = [timedelta(minutes=30 * i) for i in range(5)]
    played = play(
        tmp_path, fake, "500", parallel=4, schedule=schedule, outage_until=timedelta(minutes=90)
    )
    assert played.verdicts == 20
    assert max(played.counted.values()) == 2  # one spent in the outage, one that answered
