"""A recurrent actor-critic: LSTM/GRU cores under an action distribution and a state value.

The math, for a sequence of observations ``s`` ``[T, B, obs_dim]`` (time major), the state at its
start and the episode-start mask ``reset`` ``[T, B]``::

    y_pi, state_pi = core_pi(s, state_pi, reset)     # encoder (mlp, cnn, dict_encoder), then the LSTM/GRU cell
    y_v,  state_v  = core_v(s, state_v, reset)       # a core of its own (default), or y_v = y_pi
    y_pi, y_v      = mlp_pi(y_pi), mlp_v(y_v)        # optional (settings.head), one MLP per head
    pi(.|s_t)      = distribution(y_pi[t])           # categorical / diagonal Gaussian
    V(s_t)         = w_v . y_v[t] + b_v

Separate actor and critic cores are the default, as in sb3-contrib's RecurrentPPO
(``shared_lstm=False, enable_critic_lstm=True``): a value loss that flows into the actor's
memory made velocity-free CartPole fail to learn with one shared core. ``shared_trunk: true``
gives one core to both heads.

The state is one flat Dict space (:attr:`RecurrentActorCritic.state_space`): ``pi_h, pi_c, vf_h,
vf_c`` (LSTM) / ``pi_h, vf_h`` (GRU), or ``h, c`` / ``h`` with a shared core; each ``[B, units]``.
Every API method takes and the acting ones return it, so the policy is a pure function of its
inputs and variables. Outputs of the heads are flattened to ``[T * B]`` in time-major order.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.actor_critic import actor_critic_heads
from rlgraph_core.components.network import MLP
from rlgraph_core.components.recurrent import RecurrentCore, RecurrentSettings
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import Dict


class RecurrentActorCritic(Component):
    """A stochastic policy and a state value over sequences, with explicit state (module docstring).

    Args:
        settings: the cores' settings (``lstm`` / ``gru``, units, encoder).
        action_space: ``Discrete(n)``, ``MultiDiscrete`` or a rank-1 ``FloatBox``.
        shared_trunk: one core for both heads (else one each).
        seed: seeds the initial weights (drawn in numpy, equal on every backend).
        log_std_init: initial log standard deviation of a Gaussian policy.
        name: component name.
    """

    def __init__(
        self,
        settings: RecurrentSettings,
        action_space,
        shared_trunk: bool = False,
        seed: int = 0,
        log_std_init: float = 0.0,
        name: str = "policy",
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.units = settings.units
        self.shared_trunk = shared_trunk
        if shared_trunk:
            self.pi_core = self.vf_core = RecurrentCore(settings, rng, name="core")
            self._cores = {"": self.pi_core}
        else:
            self.pi_core = RecurrentCore(settings, rng, name="pi_core")
            self.vf_core = RecurrentCore(settings, rng, name="vf_core")
            self._cores = {"pi_": self.pi_core, "vf_": self.vf_core}
        self.distribution, self.value_head = actor_critic_heads(action_space, settings.initializer, rng, log_std_init)
        # an MLP between the core and each head (settings.head; none by default)
        self.pi_mlp = self.vf_mlp = None
        if settings.head.hidden:
            self.pi_mlp = MLP(settings.head, rng, name="pi_mlp")
            self.vf_mlp = MLP(settings.head, rng, name="vf_mlp")
        mlps = [m for m in (self.pi_mlp, self.vf_mlp) if m is not None]
        self.add_components(*self._cores.values(), *mlps, self.distribution, self.value_head)
        # the state keys of each core, once: a space made inside a compiled call would be traced
        self._keys = {prefix: tuple(core.state_space.keys()) for prefix, core in self._cores.items()}

    @property
    def state_space(self) -> Dict:
        """The state per env between steps: each core's ``h`` (and ``c``), prefixed ``pi_`` / ``vf_``
        unless the core is shared."""
        return Dict(
            {prefix + key: space for prefix, core in self._cores.items() for key, space in core.state_space.items()}
        ).with_batch_rank()

    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros of :attr:`state_space` for ``batch`` envs (the state at an episode start)."""
        return {k: np.zeros((batch, self.units), np.float32) for k in self.state_space.keys()}

    def _features(self, obs, state, reset):
        """``(policy features [T*B, units], value features [T*B, units], state after the sequence)``."""
        out_state, outputs = {}, {}
        for prefix, core in self._cores.items():
            sub = {key: state[prefix + key] for key in self._keys[prefix]}
            y, sub_out = core.call(obs, sub, reset)
            outputs[prefix] = self.ops.reshape(y, [-1, self.units])
            out_state.update({prefix + key: value for key, value in sub_out.items()})
        h_pi = outputs["" if self.shared_trunk else "pi_"]
        h_v = h_pi if self.shared_trunk else outputs["vf_"]
        if self.pi_mlp is not None:
            h_pi, h_v = self.pi_mlp.call(h_pi), self.vf_mlp.call(h_v)
        return h_pi, h_v, out_state

    def _value(self, h_v):
        return self.ops.squeeze(self.value_head.call(h_v), -1)

    @api
    def act(self, obs, state, reset, noise):
        """``(actions, log_probs, values, state)``, each ``[T * B]`` (acting: ``T = 1``), actions sampled
        with ``noise`` ``[T, B, n]`` (uniform for a categorical policy, standard normal for a Gaussian)."""
        h_pi, h_v, out_state = self._features(obs, state, reset)
        width = int(self.input_spaces["act"]["noise"].shape[-1])
        actions, log_probs = self.distribution.sample(h_pi, self.ops.reshape(noise, [-1, width]))
        return actions, log_probs, self._value(h_v), out_state

    @api
    def deterministic(self, obs, state, reset):
        """``(the most likely action, state)`` for one step (``T = 1``)."""
        h_pi, _, out_state = self._features(obs, state, reset)
        return self.distribution.deterministic(h_pi), out_state

    @api
    def value(self, obs, state, reset):
        """``V(obs)`` ``[T * B]``."""
        _, h_v, _ = self._features(obs, state, reset)
        return self._value(h_v)

    @api
    def evaluate(self, obs, state, reset, actions):
        """``(log pi(actions|obs), entropy, V(obs))``, each ``[T * B]``, of a sequence unrolled from
        ``state`` (``actions`` ``[T, B, ...]``)."""
        h_pi, h_v, _ = self._features(obs, state, reset)
        shape = tuple(self.input_spaces["evaluate"]["actions"].shape)
        log_probs, entropy = self.distribution.log_prob_entropy(h_pi, self.ops.reshape(actions, [-1, *shape]))
        return log_probs, entropy, self._value(h_v)

    def policy_outputs(self, obs, state, reset) -> dict:
        """``{"logits" | "mean", "value", "state"}`` of one step (a plain method for export)."""
        h_pi, h_v, out_state = self._features(obs, state, reset)
        first = self.distribution.params(h_pi)[0]
        return {
            "logits" if self.distribution.discrete else "mean": first,
            "value": self._value(h_v),
            "state": out_state,
        }
