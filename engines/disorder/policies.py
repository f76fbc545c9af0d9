"""The slack policies by name: a fixed K (``kslack:K``), Max-K-slack (``max``), and a registry
that quality-driven policies join (``quality``).

A policy is made per run by :func:`make_policy` from the ``--disorder`` spec, the query's
ticks per second and the run's policy parameters (``RunOptions.disorder_params``: e.g. a
quality target; the fixed policies take none). Another module adds a policy with::

    from engines.disorder.policies import register_policy
    register_policy("quality", lambda spec, tps, params: MyPolicy(...))

and ``--disorder quality`` then builds it; until one is registered, ``quality`` is an
OptionError (exit 2) that says so. A module ``engines.disorder.<name>`` (e.g.
``engines/disorder/quality.py``) is imported the first time ``--disorder <name>`` is asked
for, so a policy module that registers itself on import needs no other wiring.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from engines.disorder.policy import SlackPolicy
from engines.disorder.spec import DisorderSpec
from optimizer.ir.errors import OptionError

#: ``factory(spec, ticks per second, params) -> SlackPolicy``.
PolicyFactory = Callable[[DisorderSpec, int, Mapping[str, Any]], SlackPolicy]

_REGISTRY: dict[str, PolicyFactory] = {}


class FixedSlack:
    """``kslack:K``: the same K for every stream, all the time."""

    name = "kslack"

    def __init__(self, k: int) -> None:
        self._k = max(0, int(k))

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        pass

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        pass

    def k(self, stream: str) -> int:
        return self._k


class MaxSlack:
    """Max-K-slack: each stream's K is the largest delay seen on it so far (it only grows,
    so a stream whose delays stay under their maximum is placed exactly from then on)."""

    name = "max"

    def __init__(self) -> None:
        self._k: dict[str, int] = {}

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        if len(delays):
            self._k[stream] = max(self._k.get(stream, 0), int(delays.max()))

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        pass

    def k(self, stream: str) -> int:
        return self._k.get(stream, 0)


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make ``--disorder NAME`` build its policy with ``factory`` (a later registration
    under the same name replaces the earlier one)."""
    _REGISTRY[name] = factory


def registered() -> list[str]:
    """The names ``--disorder`` accepts, built-in and registered."""
    return sorted({"kslack", "max", *_REGISTRY})


def check_available(spec: DisorderSpec) -> None:
    """OptionError (exit 2) unless ``--disorder`` names a policy this build has."""
    if spec.kind == "none" or _factory(spec.kind) is not None:
        return
    raise OptionError(
        f"--disorder {spec.kind}: no {spec.kind} policy is available in this build",
        hint="use --disorder kslack:K (e.g. kslack:2s), max, or none",
    )


def _factory(kind: str) -> PolicyFactory | None:
    factory = _REGISTRY.get(kind)
    if factory is None and importlib.util.find_spec(f"engines.disorder.{kind}") is not None:
        importlib.import_module(f"engines.disorder.{kind}")  # registers itself
        factory = _REGISTRY.get(kind)
    return factory


def make_policy(
    spec: DisorderSpec, tps: int, params: Mapping[str, Any] | None = None
) -> SlackPolicy | None:
    """The policy of a run (None for ``none``: no buffers, today's behaviour)."""
    if spec.kind == "none":
        return None
    check_available(spec)
    factory = _factory(spec.kind)
    assert factory is not None
    return factory(spec, tps, params or {})


register_policy("kslack", lambda spec, tps, params: FixedSlack(spec.k_ticks(tps)))
register_policy("max", lambda spec, tps, params: MaxSlack())
