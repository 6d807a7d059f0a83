"""`vera up`'s restart policy: a delay that doubles per crash up to a cap, back to the
first after a child served long enough, and giving up after too many crashes in a window."""

from __future__ import annotations

from vera.config import StackSettings
from vera.stack.supervisor import RestartPolicy

POLICY = StackSettings(
    restart_backoff_seconds=0.5,
    restart_backoff_max_seconds=3.0,
    restart_reset_seconds=60.0,
    max_restarts=5,
    restart_window_seconds=100.0,
)


def test_the_delay_doubles_per_crash_up_to_the_cap() -> None:
    policy = RestartPolicy(POLICY)
    delays = [policy.next_delay(float(t), serving_since=None) for t in range(5)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_child_that_served_long_enough_starts_over_at_the_first_delay() -> None:
    policy = RestartPolicy(POLICY)
    assert policy.next_delay(0.0, serving_since=None) == 0.5
    assert policy.next_delay(10.0, serving_since=5.0) == 1.0  # served 5 s: still backing off
    assert policy.next_delay(80.0, serving_since=11.0) == 0.5  # served 69 s


def test_more_crashes_than_allowed_within_the_window_gives_up() -> None:
    policy = RestartPolicy(POLICY)
    assert all(policy.next_delay(float(t), serving_since=None) for t in range(5))
    assert policy.next_delay(5.0, serving_since=None) is None
    gave_up = policy.gave_up("identity", 5.0)
    assert (gave_up.child, gave_up.crashes) == ("identity", 6)


def test_crashes_older_than_the_window_are_forgotten() -> None:
    policy = RestartPolicy(POLICY)
    for t in (0.0, 1.0, 2.0, 3.0, 4.0):
        assert policy.next_delay(t, serving_since=None) is not None
    assert policy.next_delay(150.0, serving_since=None) is not None
    assert len(policy.crashes) == 1


def test_no_restarts_allowed_gives_up_at_the_first_crash() -> None:
    policy = RestartPolicy(StackSettings(max_restarts=0))
    assert policy.next_delay(0.0, serving_since=None) is None
