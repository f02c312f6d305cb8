"""The tf backend's ``backend:`` settings (validated without importing TensorFlow)."""

from pydantic import Field

from rlgraph_core.backend.settings import BackendSettings


class TFSettings(BackendSettings):
    """Options of the ``tf`` backend (the config's ``backend:`` section when ``train.backend`` is tf).

    Devices: ``auto``, ``cpu``, ``gpu[:N]`` (``cuda[:N]`` is an alias).
    """

    DEVICES = r"auto|cpu(?::0)?|(?:cuda|gpu)(?::\d+)?"
    DEVICE_HINT = "auto (a GPU when present, else the CPU), cpu, gpu or gpu:N (cuda and cuda:N are aliases)"

    jit_compile: bool = Field(
        True,
        description="static mode: compile the train steps with XLA (a plain tf.function, with a warning, where "
        "XLA fails); false keeps plain tf.function graphs",
    )
