"""The torch backend's ``backend:`` settings (validated without importing torch)."""

from pydantic import Field

from rlgraph_core.backend.settings import BackendSettings


class TorchSettings(BackendSettings):
    """Options of the ``torch`` backend (the config's ``backend:`` section when ``train.backend`` is torch).

    Devices: ``auto`` (the first CUDA device when there is one, else the CPU), ``cpu``,
    ``cuda[:N]`` (``gpu[:N]`` is an alias).
    """

    DEVICES = r"auto|cpu(?::0)?|(?:cuda|gpu)(?::\d+)?"
    DEVICE_HINT = "auto (CUDA when present, else the CPU), cpu, cuda or cuda:N (gpu and gpu:N are aliases)"

    compile_inference: bool = Field(
        False,
        description="static mode: torch.compile the inference functions (acting, values) too, not only the train "
        "steps; off by default because for per-step act batches the compiled call is slower than eager",
    )
    flush_denormal: bool = Field(
        True,
        description="flush denormal floats to zero on the CPU (torch.set_flush_denormal, for the thread that "
        "builds the backend), as TensorFlow and JAX do by default: Adam's moments of barely used weights decay "
        "into the denormal range, where each CPU operation on them is many times slower (static DQN on CartPole "
        "trained 1.5x as fast per CPU-second flushed); false keeps torch's default (denormals kept)",
    )
