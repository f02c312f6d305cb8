"""The jax backend's ``backend:`` settings (validated without importing JAX)."""

from pydantic import Field

from rlgraph_core.backend.settings import BackendSettings


class JaxSettings(BackendSettings):
    """Options of the ``jax`` backend (the config's ``backend:`` section when ``train.backend`` is jax).

    Devices: ``auto`` (JAX's default device), ``cpu``, ``gpu[:N]`` (``cuda[:N]`` is an alias).
    """

    DEVICES = r"auto|cpu(?::0)?|(?:cuda|gpu)(?::\d+)?"
    DEVICE_HINT = "auto (JAX's default device), cpu, gpu or gpu:N (cuda and cuda:N are aliases)"

    enable_x64: bool = Field(
        False,
        description="turn on JAX's jax_enable_x64 switch so integers are int64 inside programs too; the switch "
        "is process-wide (every JAX user in the process sees it), so it is off unless asked for",
    )
    jit_inference: bool = Field(
        True,
        description="static mode: jax.jit the inference functions (acting, values) as well as the train steps; "
        "false runs them op by op",
    )
