"""User-facing errors: the CLI prints their message as one line and exits non-zero, never a
traceback."""


class EdgeReasonError(Exception):
    """A problem the user can act on; the message says what went wrong and what to do."""

    exit_code = 1


class ConfigError(EdgeReasonError):
    """Impossible or invalid settings (beams not divisible by width, negative limits, ...)."""

    exit_code = 2


class ModelError(EdgeReasonError):
    """A model file is missing, corrupt, or cannot be loaded."""


class OutOfMemoryError(EdgeReasonError):
    """Even one search path does not fit in the KV memory the models were given."""


class DamagedFileError(ConfigError):
    """A file this program wrote earlier (bench results, rollouts, a cache, a profile) that it
    cannot use: cut short, edited, or of another version. `problem` names the first wrong field."""

    def __init__(self, path: object, problem: str, todo: str = "") -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}" + (f"; {todo}" if todo else ""))
