"""engines/sources/mqtt_link.py: the connection warnings of an MQTT client, on a clock the
test moves: a lost connection is told at once and while it lasts, its return at once, and a
flapping broker is summarised instead of echoed."""

from __future__ import annotations

import doctest
import io

from engines.sources import mqtt_link
from engines.sources.mqtt_link import REMIND_EVERY_S, WARN_EVERY_S, Link


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _link() -> tuple[Link, io.StringIO, Clock]:
    err, clock = io.StringIO(), Clock()
    link = Link("stream 'r' (mqtt://h:1/t)", "h:1", "no data arrives meanwhile", err, clock)
    link.up()
    return link, err, clock


def _lines(err: io.StringIO) -> list[str]:
    return err.getvalue().splitlines()


def test_doctests() -> None:
    assert doctest.testmod(mqtt_link).failed == 0


def test_lost_reminded_and_back() -> None:
    link, err, clock = _link()
    assert _lines(err) == []  # the first connection says nothing
    clock.now += 5
    link.lost("Unspecified error")
    assert _lines(err) == [
        "warning: stream 'r' (mqtt://h:1/t): lost the connection to the MQTT broker at h:1 "
        "(Unspecified error); reconnecting (1 s, doubling to 5 s); no data arrives meanwhile"
    ]
    clock.now += REMIND_EVERY_S - 1
    link.tick()
    assert len(_lines(err)) == 1
    clock.now += 1
    link.tick()  # paho's failed reconnect or the reader
    assert _lines(err)[-1].endswith(
        f"the MQTT broker at h:1 is still unreachable ({REMIND_EVERY_S:.0f} s)"
    )
    clock.now += 2.5
    link.up()
    assert _lines(err)[-1] == (
        "warning: stream 'r' (mqtt://h:1/t): reconnected to the MQTT broker at h:1 after "
        f"{REMIND_EVERY_S + 2.5:.1f} s"
    )
    assert link.metrics() == {
        "connects": 2,
        "disconnects": 1,
        "disconnected_s": REMIND_EVERY_S + 2.5,
        "longest_disconnect_s": REMIND_EVERY_S + 2.5,
        "connection_warnings": 3,
    }


def test_a_flapping_broker_is_summarised() -> None:
    link, err, clock = _link()
    link.lost("gone")
    clock.now += 0.5
    link.up()
    assert len(_lines(err)) == 2  # lost, then reconnected at once
    for _ in range(5):  # five more flaps within WARN_EVERY_S: nothing printed yet
        clock.now += 0.5
        link.lost("gone")
        clock.now += 0.5
        link.up()
        link.tick()
    assert len(_lines(err)) == 2
    clock.now = 1000.5 + WARN_EVERY_S
    link.tick()
    assert _lines(err)[-1].endswith(
        f"lost and regained the connection to the MQTT broker at h:1 5 time(s) in the last "
        f"{WARN_EVERY_S:.0f} s"
    )
    # down again, within WARN_EVERY_S of the last line: told when the interval is up, with
    # the count; then its return at once
    clock.now += 1
    link.lost("gone")
    assert len(_lines(err)) == 3
    clock.now += WARN_EVERY_S
    link.tick()
    assert "lost the connection" in _lines(err)[-1]
    clock.now += 1
    link.up()
    assert "reconnected" in _lines(err)[-1] and len(_lines(err)) == 5
    assert link.disconnects == 7 and link.warnings == 5
