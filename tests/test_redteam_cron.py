"""SPEC §12: a time in state that lies in the future is not trusted. One cron round run with the
clock a year ahead stores its `said_at` a year ahead; back on the right clock, the ongoing outage
is said again after a day, not a year."""

from __future__ import annotations

from datetime import timedelta

from test_cron import World, world  # noqa: F401 - the fixture, shared with tests/test_cron.py


def test_a_said_at_in_the_future_does_not_silence_the_outage(world: World) -> None:  # noqa: F811
    """said_at a year ahead: the next round on today's clock says the outage again."""
    world.provider_down = True
    world.account.labels = ["d1"]
    world.account.write()
    world.shift += timedelta(days=365)
    assert "could not connect" in world.round().stderr
    world.shift -= timedelta(days=365)
    again = world.round()
    assert "could not connect" in again.stderr, again.stderr
