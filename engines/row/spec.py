"""The row engine's registration (engines/registry.py): the gateway that hosts the streams,
windows, R2S operators and the sink, and runs any operator."""

from __future__ import annotations

from engines.registry import EngineSpec
from optimizer.ir.placement import ROW, ROW_CAPABILITIES

ENGINE = EngineSpec(
    name=ROW,
    description="the push-based row engine in Python (always enabled; hosts streams, windows "
    "and output)",
    capabilities=ROW_CAPABILITIES,
    colours=("#dde8f4", "#2f6497"),
)
