"""How the command line spells the run's options in messages from the run-time.

The run-time (``engines.runtime``) names an option by ``RunOptions``' field (``output``,
``dead_letter``...) unless told otherwise; every ``hycq`` command that runs or samples a
query passes these flag spellings, so a message says ``--output must end in ...``.
"""

from __future__ import annotations

from engines.runtime.options import OptionNames

CLI_OPTION_NAMES = OptionNames(
    output="--output",
    metrics="--metrics",
    dead_letter="--dead-letter",
    data="--data",
    rate="--rate",
    duration="--duration",
    memory_limit="--memory-limit",
)
