"""Multi-stream raw-window join workloads whose best join order changes mid-run.

``n`` keyed streams (3 to 8) named ``a``, ``b``, ... and ``z`` (the last is always ``z``, so
one catalog serves every ``n``: queries/drift/clique_N.sql joins ``a .. `` and ``z``). As in
HybMig's experiments (Yang et al., TKDE'07, section 5): a clique join on the key, every
stream drawing from a *common* domain of 20 keys (join selectivity 1/20 = 0.05 between two
streams), except that the *rare* values (a domain of 400 keys: selectivity 1/400 = 0.0025
with a common stream) go to stream ``a`` during the warm-up and to the last stream ``z``
after ``shift_at`` seconds. So the best left-deep order starts with ``a`` before the shift
and with ``z`` after it. ``uniform=True`` gives JISC's data instead (Aly et al., EDBT'14,
section 6): every stream uniform over the common domain, nothing shifts.
"""

from __future__ import annotations

from engines.sources.keyed import KeyedStream
from optimizer.ir.errors import OptionError
from optimizer.ir.profile import Profile

#: Key domains: common (selectivity 0.05) and rare (0.0025 against a common stream).
COMMON_KEYS = 20
RARE_KEYS = 400
#: Stream counts a workload may have.
MIN_STREAMS, MAX_STREAMS = 3, 8


def join_stream_names(n: int) -> list[str]:
    """``a``, ``b``, ... for the first ``n - 1`` streams, ``z`` for the last."""
    if isinstance(n, bool) or not isinstance(n, int) or not MIN_STREAMS <= n <= MAX_STREAMS:
        raise OptionError(
            f"a join workload has {MIN_STREAMS} to {MAX_STREAMS} streams, got {n!r}",
            hint="e.g. --join-streams 6",
        )
    return [*"abcdefg"[: n - 1], "z"]


def join_workload(
    n: int,
    rate: float = 1.0,
    shift_at: float = 60.0,
    uniform: bool = False,
    time_unit: str = "s",
) -> list[KeyedStream]:
    """The ``n`` streams of the workload (module docstring), ``rate`` tuples/s each."""
    names = join_stream_names(n)
    if not uniform and not shift_at > 0:
        raise OptionError(f"the shift must come after 0 s, got {shift_at:g}", hint="--shift-at 60")
    rare_first = Profile((0.0, shift_at), (RARE_KEYS, COMMON_KEYS), (False,))
    rare_last = Profile((0.0, shift_at), (COMMON_KEYS, RARE_KEYS), (False,))
    streams = []
    for i, name in enumerate(names):
        profile = None
        if not uniform:
            profile = rare_first if i == 0 else rare_last if i == n - 1 else None
        streams.append(
            KeyedStream(
                name,
                rate=rate,
                keys=int(profile.highest) if profile is not None else COMMON_KEYS,
                keys_profile=profile,
                time_unit=time_unit,
            )
        )
    return streams
