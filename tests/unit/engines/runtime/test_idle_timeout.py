"""The idle-stream rule (``--idle-timeout``, engines/runtime/inputs.py ``idle_floor``) and
how ``MergedInputs.tell`` applies it to an engine's clock."""

from __future__ import annotations

from engines.runtime.inputs import idle_floor


def test_no_timeout_moves_nothing() -> None:
    assert idle_floor({"a": 0, "b": 100}, set(), None) == {}


def test_a_stream_behind_the_lead_by_more_than_s_is_moved() -> None:
    assert idle_floor({"a": 10, "b": 100, "c": 95}, set(), 30) == {"a": 70}
    assert idle_floor({"a": 70, "b": 100}, set(), 30) == {}  # exactly S behind: waits


def test_ended_streams_do_not_lead_or_move() -> None:
    assert idle_floor({"a": 10, "b": 100}, {"b"}, 30) == {}
    assert idle_floor({"a": 10, "b": 100, "c": 50}, {"b"}, 30) == {"a": 20}


def test_tell_moves_an_idle_stream_on_the_engine() -> None:
    """MergedInputs.tell: after passing the reported progress on, the rule's floors."""
    from engines.runtime.inputs import MergedInputs

    calls: list[tuple[str, int]] = []

    class Engine:
        def advance_stream(self, stream: str, ts: int) -> None:
            calls.append((stream, ts))

        def end_stream(self, stream: str) -> None:
            calls.append((stream, -1))

    m = MergedInputs.__new__(MergedInputs)
    m.progress_bar, m._ended, m.known, m.gone, m.idle_advanced = {}, [], {}, set(), {}
    m.idle_ticks = 30
    m.progress_bar.update({"a": 10, "b": 100})
    m.tell(Engine())  # type: ignore[arg-type]
    assert calls == [("a", 10), ("b", 100), ("a", 70)]
    assert m.idle_advanced == {"a": 1}
