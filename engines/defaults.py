"""Run-time defaults, in a module light enough for the CLI's --help to import."""

#: Event-time span of a generated stream when --duration is not given (seconds).
DEFAULT_DURATION_S = 360.0
