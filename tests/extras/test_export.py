"""ONNX export (extra ``onnx``): for checkpoints written by torch and by tf, the exported graph's
outputs equal the agent's own on a batch of observations; the export and ``rlgraph evaluate
policy.onnx`` run in a process where torch and TensorFlow cannot be imported."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from extras_helpers import has_backend, run_cli
from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.plugins import get_plugin_manager

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None,
    reason="the onnx extra (onnx, onnxruntime) is not installed",
)

#: (shipped config, backend that writes the checkpoint, overrides): every agent family and
#: action kind (discrete with a start offset through DQN's dueling head, bounded boxes), both backends.
CASES = [
    ("dqn_rainbowish_cartpole", "torch", []),
    ("sac_pendulum", "torch", []),
    ("ppo_pendulum", "torch", ["agent.network.activation=elu"]),
    ("dqn_cartpole", "tf", ["agent.network.activation=leaky_relu"]),
    ("ppo_cartpole", "tf", ["agent.preprocessor=running_mean_std"]),
    ("a2c_cartpole", "tf", ["agent.shared_trunk=true"]),
    # offline runs' agents (their checkpoints name the offline executor and a dataset the export never opens)
    ("bc", "torch", ["env.id=CartPole-v1"]),
    ("bc", "tf", ["env.id=Pendulum-v1"]),
    ("cql", "torch", ["env.id=CartPole-v1"]),
    ("cql_sac", "tf", ["env.id=Pendulum-v1"]),
    ("iql", "torch", ["env.id=Pendulum-v1"]),
]

#: an offline agent's run config: the offline executor and a dataset that does not exist
OFFLINE_AGENTS = ("bc", "cql", "cql_sac", "iql")


def _raw_config(name: str) -> dict:
    if name in OFFLINE_AGENTS:
        return {"agent": {"type": name}, "train": {"executor": "offline"}, "executor": {"dataset": "not-opened"}}
    return load_shipped_config(name)


def make_checkpoint(name, backend, overrides, directory):
    """A checkpoint of the shipped config ``name`` written by ``backend``, with random non-trivial weights."""
    raw = apply_overrides(_raw_config(name), [f"train.backend={backend}", *overrides])
    config = validate_config(raw)
    assembly = assemble(config, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(env.observation_space, env.action_space, with_memory=False)
    rng = np.random.default_rng(0)
    weights = agent.get_weights()
    # Perturb every weight (biases start at zero, normaliser statistics at 0/1): nothing trivial.
    agent.set_weights(
        {
            k: (v + rng.normal(0, 0.3, v.shape) * (1 if "var" not in k else 0) + (0.5 if "var" in k else 0)).astype(
                v.dtype
            )
            for k, v in weights.items()
        }
    )
    agent.save(str(directory), {"config": config.to_dict()})
    obs = None  # a Dict observation (a masked env's) is made by its test
    if not hasattr(env.observation_space, "spaces"):
        obs = np.stack([env.observation_space.sample() for _ in range(32)]).astype(np.float32)
    env.close()
    return agent, obs


@pytest.mark.parametrize(("name", "backend", "overrides"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_exported_outputs_equal_the_agents(name, backend, overrides, tmp_path):
    if not has_backend(backend):
        pytest.skip(f"backend {backend} is not installed")
    from rlgraph_core.export.onnx_policy import OnnxPolicy

    agent, obs = make_checkpoint(name, backend, overrides, tmp_path / "ck")
    code, stdout, stderr = run_cli(
        "export", str(tmp_path / "ck"), "--format", "onnx", "--out", str(tmp_path / "p.onnx")
    )
    assert code == 0, stderr
    policy = OnnxPolicy(tmp_path / "p.onnx")
    got = policy.outputs(obs)
    own = {k: agent.backend.to_numpy(v) for k, v in agent.policy_outputs(agent.backend.to_tensor(obs)).items()}
    assert set(got) == set(own) and "action" in got
    assert {"q_values", "logits", "mean"} & set(got)
    for key, value in own.items():
        assert got[key].shape == value.shape, key
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
    # The action output is what the agent acts with, greedily.
    acted = agent.act(obs, explore=False)
    assert got["action"].dtype == acted.dtype
    np.testing.assert_allclose(policy(obs), acted, rtol=1e-4, atol=1e-5)
    assert policy.env_id == apply_overrides(_raw_config(name), overrides)["env"]["id"]


#: Runs rlgraph's CLI with torch, tensorflow, jax and ray made unimportable.
BLOCKED = textwrap.dedent(
    """
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "tensorflow", "jax", "ray"):
                raise ImportError(f"{name} is blocked in this test")
    sys.meta_path.insert(0, Block())
    from rlgraph_core.cli import main
    code = main(sys.argv[1:])
    assert not {m for m in sys.modules if m.split(".")[0] in ("torch", "tensorflow", "jax", "ray")}
    sys.exit(code)
    """
)


def run_blocked(*argv, cwd):
    env = {**os.environ, "RLGRAPH_DISABLE_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to write the checkpoint")
def test_export_and_evaluate_without_any_framework(tmp_path):
    """A torch checkpoint is exported and evaluated (with a 10-episode gif) where torch cannot be imported."""
    make_checkpoint("dqn_cartpole", "torch", ["agent.network.hidden=[16]"], tmp_path / "ck")
    done = run_blocked("export", str(tmp_path / "ck"), "--out", str(tmp_path / "p.onnx"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    gif = tmp_path / "p.gif"
    args = ["evaluate", str(tmp_path / "p.onnx"), "--episodes", "10", "--env", "CartPole-v1"]
    if importlib.util.find_spec("pygame") and importlib.util.find_spec("imageio_ffmpeg"):
        args += ["--video", str(gif)]
    done = run_blocked(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mean return" in done.stdout and "onnxruntime" in done.stdout
    if "--video" in args:
        import imageio.v3 as iio

        frames = int(done.stdout.split("rendered ")[1].split()[0])
        assert iio.improps(gif, index=None).shape[0] == frames > 10  # every frame, streamed


def test_export_errors_are_one_paragraph(tmp_path):
    code, _, stderr = run_cli("export", str(tmp_path / "missing"), "--out", str(tmp_path / "p.onnx"))
    assert code == 2 and "rlgraph: error:" in stderr and "Traceback" not in stderr
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    code, _, stderr = run_cli("evaluate", str(bad), "--env", "CartPole-v1")
    assert code == 2 and "could not be loaded as an ONNX model" in stderr


@pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to write the checkpoint")
def test_export_out_and_evaluate_env_refusals_are_one_paragraph(tmp_path, read_only_dir):
    """Issue 35 §5: export --out a read-only folder, an existing folder or /proc, and evaluating a policy
    on an env whose observations do not fit it, ended in tracebacks."""
    make_checkpoint("dqn_cartpole", "torch", ["agent.network.hidden=[16]"], tmp_path / "ck")
    for out, said in (
        (read_only_dir / "p.onnx", f"its folder '{read_only_dir}' is not writable"),
        (tmp_path, f"is an existing folder; pass the file to write, e.g. {tmp_path / 'policy.onnx'}"),
        ("/proc/p.onnx", "its folder '/proc' is not writable"),
    ):
        code, _, stderr = run_cli("export", str(tmp_path / "ck"), "--out", str(out))
        assert code == 2 and "Traceback" not in stderr, stderr
        assert f"rlgraph: error: --out '{out}'" in stderr and said in stderr, stderr
    assert run_cli("export", str(tmp_path / "ck"), "--out", str(tmp_path / "p.onnx"))[0] == 0
    import gymnasium as gym

    class Continuous4(gym.Env):  # CartPole's observation shape, continuous actions
        observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
        action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    gym.register("ExportTestContinuous4-v0", entry_point=Continuous4)
    for env, said in (
        ("Acrobot-v1", "its observations have shape (6,), but the policy"),
        ("ExportTestContinuous4-v0", "does not fit the discrete actions of the policy"),
    ):
        code, _, stderr = run_cli("evaluate", str(tmp_path / "p.onnx"), "--env", env, "--episodes", "1")
        assert code == 2 and "Traceback" not in stderr, stderr
        assert f"rlgraph: error: --env {env}: " in stderr and said in stderr and "--env CartPole-v1" in stderr, stderr


@pytest.mark.parametrize(("name", "backend"), [("ppo_masked_pick", "torch"), ("dqn_cartpole", "tf")])
def test_masked_policies_export_with_the_mask_as_an_input(name, backend, tmp_path):
    """A masked PPO (sb3's action_masks(), torch) and a masked DQN (PettingZoo's key, tf): the exported
    graph takes the mask, its outputs equal the agent's, its actions are legal, and it evaluates."""
    if not has_backend(backend):
        pytest.skip(f"backend {backend} is not installed")
    from rlgraph_core.export.onnx_policy import OnnxPolicy

    overrides = [] if name == "ppo_masked_pick" else ["env.id=rlgraph_core.testing.masked_env:PickLegalMax"]
    agent, _ = make_checkpoint(name, backend, ["agent.network.hidden=[16]", *overrides], tmp_path / "ck")
    code, _, stderr = run_cli("export", str(tmp_path / "ck"), "--out", str(tmp_path / "p.onnx"))
    assert code == 0, stderr
    policy = OnnxPolicy(tmp_path / "p.onnx")
    rng = np.random.default_rng(0)
    mask = (rng.random((32, 6)) < 0.4).astype(np.int8)
    mask[np.arange(32), rng.integers(0, 6, 32)] = 1
    obs = {"observation": rng.random((32, 6)).astype(np.float32), "action_mask": mask}
    got = policy.outputs(obs)
    own = {k: agent.backend.to_numpy(v) for k, v in agent.policy_outputs(agent.backend.to_tensor(obs)).items()}
    assert set(got) == set(own)
    for key, value in own.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
    np.testing.assert_array_equal(policy(obs), agent.act(obs, explore=False))
    assert mask[np.arange(32), policy(obs)].all()
    with pytest.raises(Exception, match="masked policy"):
        policy(obs["observation"])
    code, stdout, stderr = run_cli("evaluate", str(tmp_path / "p.onnx"), "--episodes", "2")
    assert code == 0, stderr


@pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to write the checkpoint")
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_policy_exports_with_its_state_as_inputs_and_outputs(cell, tmp_path):
    """A recurrent PPO policy (perturbed weights, torch) exports as one step with its state as extra
    inputs and outputs: six steps of five envs, each carrying the state the previous one returned
    (onnxruntime's own and torch's own, never mixed), with two envs starting a new episode at step
    3, give torch's outputs and states; ``rlgraph evaluate policy.onnx`` plays it with its state and
    scores what the checkpoint scores."""
    import rlgraph_core as rl
    from rlgraph_core.evaluation import agent_policy, evaluate_policy
    from rlgraph_core.export.onnx_policy import OnnxPolicy
    from rlgraph_core.testing.memory_env import RecallCue

    algo = rl.make(
        "ppo",
        env={"id": "rlgraph_core.testing.memory_env:RecallCue", "num_envs": 2},
        backend="torch",
        network={"type": cell, "units": 8, "encoder": {"hidden": [8]}, "seq_len": 4},
        n_steps=8,
        batch_size=8,
        eval_interval=10**9,
    )
    agent = algo.agent
    rng = np.random.default_rng(0)
    agent.set_weights({k: (v + rng.normal(0, 0.3, v.shape)).astype(v.dtype) for k, v in agent.get_weights().items()})
    checkpoint = algo.save(tmp_path / "ck")
    code, _, stderr = run_cli("export", str(checkpoint), "--out", str(tmp_path / "p.onnx"))
    assert code == 0, stderr
    policy = OnnxPolicy(tmp_path / "p.onnx")
    keys = ["pi_c", "pi_h", "vf_c", "vf_h"] if cell == "lstm" else ["pi_h", "vf_h"]
    assert policy.state_keys == keys
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    own_state, onnx_state = agent.initial_state(5), None
    for step in range(6):
        obs = rng.normal(size=(5, 3)).astype(np.float32)
        starts = np.full(5, step == 0)
        starts[[1, 3]] |= step == 3
        own = agent.policy_outputs(to_t(obs), {k: to_t(v) for k, v in own_state.items()}, to_t(starts))
        own = {k: to_np(v) for k, v in own.items()}
        got = policy.outputs(obs, onnx_state, None if step == 0 else starts)
        assert set(got) == set(own) == {"action", "logits", "value", *(f"next_state.{k}" for k in keys)}
        for key, value in own.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"step {step}: {key}")
        actions, state = agent.act(obs, False, state=own_state, episode_start=starts)
        np.testing.assert_array_equal(got["action"], actions)
        own_state = {k: own[f"next_state.{k}"] for k in keys}
        np.testing.assert_allclose(own_state["pi_h"], state["pi_h"], rtol=1e-5, atol=1e-6)
        onnx_state = policy.predict(obs, onnx_state, None if step == 0 else starts)[1]
    assert np.abs(own_state["pi_h"]).max() > 0.1  # a state that matters
    # the same greedy episodes from the checkpoint and from the file (which carries its state itself)
    env = RecallCue()
    own = evaluate_policy(agent_policy(agent), env, 20, seed=10_000)["eval_return_mean"]
    code, stdout, stderr = run_cli("evaluate", str(tmp_path / "p.onnx"), "--episodes", "20")
    assert code == 0, stderr
    assert f"mean return {own:.1f} ± " in stdout, (own, stdout)
    assert evaluate_policy(policy, env, 20, seed=10_000)["eval_return_mean"] == own


#: The optional package each env family of the shipped configs needs.
_FAMILY = {
    "ALE/": "ale_py",
    "MiniGrid-": "minigrid",
    "popgym-": "popgym",
    "HalfCheetah": "mujoco",
    "LunarLander": "Box2D",
}


def _shipped():
    from rlgraph_core.config.run import shipped_configs

    return shipped_configs()


@pytest.mark.skipif(not has_backend("torch"), reason="compares with the torch backend")
@pytest.mark.parametrize("name", _shipped())
def test_every_shipped_configs_policy_exports_and_matches_torch(name, tmp_path):
    """The agent of each shipped config (image policies included), built untrained on torch eager
    (its executor is irrelevant to the policy), exports; the ONNX outputs equal torch's."""
    from rlgraph_core.export.onnx_policy import export_onnx, OnnxPolicy

    shipped = load_shipped_config(name)
    if shipped.get("multi_agent") is not None:
        pytest.skip("a multi-agent config exports per policy: test_a_multi_agent_run_exports_one_file_per_policy_...")
    module = next((m for prefix, m in _FAMILY.items() if shipped["env"]["id"].startswith(prefix)), None)
    if module is not None:
        pytest.importorskip(module)
    agent_raw = dict(shipped["agent"])
    if "batch_size" in agent_raw:  # the build runs the loss on one batch: a small one is cheaper, same policy
        # (a recurrent policy's minibatch is whole sequences: one sequence)
        seq_len = (agent_raw.get("network") or {}).get("seq_len")
        agent_raw["batch_size"] = min(8, agent_raw["batch_size"]) if seq_len is None else seq_len
    env_raw = {**shipped["env"], "vectorization": "sync"}
    # 42x42 Atari frames: the same Nature CNN (8x8/4, 4x4/2, 3x3/1 down to 1x1) at a quarter of the cost
    env_raw["wrappers"] = [
        {**w, "screen_size": 42} if w.get("type") == "atari_preprocessing" else w for w in env_raw.get("wrappers", [])
    ]
    raw = {"agent": agent_raw, "env": env_raw, "train": {"backend": "torch", "mode": "eager", "seed": 1, "loggers": []}}
    config = validate_config(raw)
    assembly = assemble(config, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(env.observation_space, env.action_space, with_memory=False)
    samples = [env.observation_space.sample() for _ in range(4)]
    env.close()
    if isinstance(samples[0], dict):  # a Dict observation (a legal-action mask): a dict of batches
        obs = {k: np.stack([x[k] for x in samples]) for k in samples[0]}
        if "action_mask" in obs:
            obs["action_mask"][:, 0] = 1  # at least one legal action per row
    else:
        obs = np.stack(samples)
    agent.save(str(tmp_path / "ck"), {"config": config.to_dict()})
    policy = OnnxPolicy(export_onnx(tmp_path / "ck", tmp_path / "p.onnx"))
    to_t = agent.backend.to_tensor
    state = agent.initial_state(4)
    if state is None:
        got = policy.outputs(obs)
        own = agent.policy_outputs(to_t(obs))
    else:  # a recurrent policy: one step from a non-zero state, the first env starting an episode
        state = {k: np.random.default_rng(1).normal(size=v.shape).astype(np.float32) for k, v in state.items()}
        starts = np.array([True, False, False, False])
        got = policy.outputs(obs, state, starts)
        own = agent.policy_outputs(to_t(obs), {k: to_t(v) for k, v in state.items()}, to_t(starts))
    own = {k: agent.backend.to_numpy(v) for k, v in own.items()}
    assert set(got) == set(own)
    for key, value in own.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-4, err_msg=key)


@pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to write the checkpoint")
def test_an_atari_policy_is_evaluated_on_its_runs_evaluation_env(tmp_path, monkeypatch):
    """Issue 30: ``rlgraph evaluate policy.onnx`` built the raw env (210x160 RGB frames, refused by
    the policy's 84x84x4 input) instead of the run's env with the evaluation form of its wrappers."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    import gymnasium as gym

    from rlgraph_core import cli
    from rlgraph_core.atari_wrappers import EpisodicLife, FireOnServe

    # 42x42 frames: the same Nature CNN at a quarter of the cost
    wrappers = (
        "env.wrappers=[{type: atari_preprocessing, screen_size: 42, terminal_on_life_loss: true}, "
        "{type: clip_reward}, {type: frame_stack, stack_size: 4}]"
    )
    overrides = ["train.mode=eager", "agent.batch_size=8", wrappers]
    make_checkpoint("ppo_atari", "torch", overrides, tmp_path / "ck")
    assert run_cli("export", str(tmp_path / "ck"), "--out", str(tmp_path / "p.onnx"))[0] == 0
    made, real = [], cli.make_eval_env

    def recording(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(cli, "make_eval_env", recording)
    code, stdout, stderr = run_cli("evaluate", str(tmp_path / "p.onnx"), "--episodes", "1", "--seed", "3")
    assert code == 0, stderr
    assert "mean return" in stdout
    (env,) = made
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(type(env))
        env = env.env
    assert env.spec.kwargs["frameskip"] == 1 and made[0].observation_space.shape == (42, 42, 4)
    assert gym.wrappers.AtariPreprocessing in chain and FireOnServe in chain  # whole games, the ball served
    assert EpisodicLife not in chain and gym.wrappers.ClipReward not in chain  # ... with the unclipped score


#: Multi-agent runs (issue 32): a masked self-play game with one shared policy (torch), and MPE
#: simple_adversary with a policy per team, the agents told their id (tf; 4.6 s at load ~2, 24 s at ~8):
#: agents of different observation lengths, so each policy's file takes its own length.
MULTI_AGENT_CASES = [
    (
        "torch",
        {"id": "pettingzoo:pettingzoo.classic.tictactoe_v3", "num_envs": 1},
        {"policies": {"shared": {}}, "policy_mapping": {"*": "shared"}, "self_play": {"opponent": "pool"}},
        {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3}], "hidden": [16], "scale": 1.0},
    ),
    pytest.param(
        "tf",
        {"id": "pettingzoo:mpe2.simple_adversary_v3", "num_envs": 1, "kwargs": {"continuous_actions": False}},
        {
            "policies": {"adversary": {}, "team": {}},
            "policy_mapping": {"adversary_*": "adversary", "agent_*": "team"},
            "agent_id": True,
        },
        {"type": "mlp", "hidden": [16]},
    ),
]


@pytest.mark.parametrize(("backend", "env", "multi_agent", "network"), MULTI_AGENT_CASES, ids=["tictactoe", "mpe"])
def test_a_multi_agent_run_exports_one_file_per_policy_equal_to_the_framework(
    backend, env, multi_agent, network, tmp_path
):
    """``rlgraph export`` of a multi-agent checkpoint writes NAME.POLICY.onnx per policy; each file's
    outputs equal its policy's on that policy's agents' observations from the env (the mask an input
    of the game's policy, its actions legal); ``rlgraph evaluate`` of such a file is refused in one paragraph."""
    pytest.importorskip("pettingzoo")
    if not has_backend(backend):
        pytest.skip(f"backend {backend} is not installed")
    import json

    from rlgraph_core.export.onnx_policy import OnnxPolicy

    if network["type"] == "cnn":
        network = {**network, "channels": "last"}
    agent_raw = {"type": "ppo", "network": network, "n_steps": 8, "batch_size": 8}
    raw = {"agent": agent_raw, "env": env, "multi_agent": multi_agent}
    raw["train"] = {"backend": backend, "mode": "eager", "seed": 0, "loggers": []}
    config = validate_config(raw)
    assembly = assemble(config, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(env.single_observation_space, env.single_action_space, with_memory=False)
    rng = np.random.default_rng(0)
    agent.set_weights({k: (v + rng.normal(0, 0.3, v.shape)).astype(v.dtype) for k, v in agent.get_weights().items()})
    agent.save(str(tmp_path / "ck"), {"config": config.to_dict()})
    # the rows of a few steps of the env (one copy: a row per agent or seat), random legal actions
    rows, obs = [], env.reset(seed=0)[0]
    for _ in range(6):
        rows.append(obs)
        mask = obs["action_mask"] if isinstance(obs, dict) else np.ones((env.num_envs, 5), np.int8)
        obs = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in mask]))[0]
    names = env.row_agents()
    env.close()
    code, stdout, stderr = run_cli("export", str(tmp_path / "ck"), "--out", str(tmp_path / "p.onnx"))
    assert code == 0, stderr
    assert "one ONNX file per policy" in stdout
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == sorted(f"p.{name}.onnx" for name in agent.policies)
    for name, policy in agent.policies.items():
        exported = OnnxPolicy(tmp_path / f"p.{name}.onnx")
        assert exported.metadata["rlgraph.policy"] == name
        own_agents = json.loads(exported.metadata["rlgraph.policy_agents"])
        index = [i for i, a in enumerate(names) if a in own_agents]
        assert index and own_agents == [names[i] for i in index]
        batch = [agent._own_obs(name, r, index) for r in rows]
        obs = (
            {k: np.concatenate([b[k] for b in batch]) for k in batch[0]}
            if isinstance(batch[0], dict)
            else np.concatenate(batch)
        )
        got = exported.outputs(obs)
        own = {k: policy.backend.to_numpy(v) for k, v in policy.policy_outputs(policy.backend.to_tensor(obs)).items()}
        assert set(got) == set(own) and "action" in got
        for key, value in own.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"{name}: {key}")
        np.testing.assert_array_equal(exported(obs), policy.act(obs, explore=False))
        if isinstance(obs, dict):  # the game's mask is an input, and its actions are legal
            assert obs["action_mask"][np.arange(len(got["action"])), got["action"]].all()
    code, _, stderr = run_cli("evaluate", str(tmp_path / f"p.{next(iter(agent.policies))}.onnx"))
    assert code != 0 and "multi-agent run" in stderr and "Traceback" not in stderr


@pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to write the checkpoint")
@pytest.mark.parametrize("algorithm", ["ppo", "dqn"])
def test_a_cnn_lstm_policy_exports_with_uint8_frames_and_its_state(algorithm, tmp_path):
    """A recurrent PPO policy with a CNN in front of each LSTM core, or an R2D2-style DQN's CNN-LSTM
    Q-network (perturbed weights, torch), on uint8 frames of RecallCueImage exports as one step: five
    steps of four envs, two starting an episode at step 2, give torch's outputs and states, each side
    carrying its own state."""
    import rlgraph_core as rl
    from rlgraph_core.export.onnx_policy import OnnxPolicy

    cnn = {"type": "cnn", "preset": "custom", "conv": [{"filters": 4, "kernel": 3, "stride": 3}], "hidden": [8]}
    settings = dict(n_steps=8, batch_size=8) if algorithm == "ppo" else dict(burn_in=1)
    algo = rl.make(
        algorithm,
        env={"id": "rlgraph_core.testing.memory_env:RecallCueImage", "num_envs": 2},
        backend="torch",
        network={"type": "lstm", "units": 8, "encoder": cnn, "seq_len": 4},
        eval_interval=10**9,
        **settings,
    )
    agent = algo.agent
    rng = np.random.default_rng(1)
    agent.set_weights({k: (v + rng.normal(0, 0.3, v.shape)).astype(v.dtype) for k, v in agent.get_weights().items()})
    code, _, stderr = run_cli("export", str(algo.save(tmp_path / "ck")), "--out", str(tmp_path / "p.onnx"))
    assert code == 0, stderr
    policy = OnnxPolicy(tmp_path / "p.onnx")
    keys = ["pi_c", "pi_h", "vf_c", "vf_h"] if algorithm == "ppo" else ["c", "h"]
    heads = {"logits", "value"} if algorithm == "ppo" else {"q_values"}
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    own_state, onnx_state = agent.initial_state(4), None
    for step in range(5):
        obs = rng.integers(0, 256, (4, 6, 6, 1)).astype(np.uint8)
        starts = np.full(4, step == 0)
        starts[[0, 2]] |= step == 2
        own = agent.policy_outputs(to_t(obs), {k: to_t(v) for k, v in own_state.items()}, to_t(starts))
        own = {k: to_np(v) for k, v in own.items()}
        got = policy.outputs(obs, onnx_state, None if step == 0 else starts)
        assert set(got) == {"action", *heads, *(f"next_state.{k}" for k in keys)}
        for key, value in own.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"step {step}: {key}")
        own_state = {k: own[f"next_state.{k}"] for k in keys}
        onnx_state = policy.predict(obs, onnx_state, None if step == 0 else starts)[1]
    assert np.abs(own_state[keys[1]]).max() > 0.1  # a state that matters
