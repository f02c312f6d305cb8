"""Exception types raised for user mistakes; each carries a one-paragraph explanation."""


class RLGraphError(Exception):
    """Base class of every error rlgraph raises for a user mistake (shown without traceback)."""


class ConfigError(RLGraphError, ValueError):
    """A configuration names an unknown part or holds a bad value."""


class PluginError(RLGraphError):
    """A plugin is missing, failed to load, or registers a name another plugin already took."""


class BuildError(RLGraphError):
    """A component graph could not be built: wiring, space or shape mismatch."""


class CheckpointError(RLGraphError):
    """A checkpoint is missing, corrupt, or does not match the agent it is loaded into."""


class EnvDataError(RLGraphError):
    """An environment returned an observation or reward that is not a finite number."""


class NonFiniteError(RLGraphError):
    """A loss, gradient or weight became NaN or infinite; nothing non-finite is applied or saved."""


class DiskFullError(CheckpointError):
    """A checkpoint could not be written: no space left (or the quota is used up) where it goes."""
