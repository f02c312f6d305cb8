"""ray_impala: IMPALA learns CartPole with 2 asynchronous workers, a killed worker is restarted,
settings are validated and the executor is listed without importing ray."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_ray.settings import RayImpalaSettings

QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]"]
IMPALA = load_shipped_config("impala_cartpole_ray")


def impala(*overrides: str):
    return validate_config(apply_overrides(IMPALA, QUIET + list(overrides)))


def error(raw: dict, *overrides: str) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_config(apply_overrides(raw, list(overrides)))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def rows(out_dir) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------- settings (no Ray session)
def test_shipped_config_validates_with_the_impala_settings():
    config = impala()
    assert config.train.executor == "ray_impala" and isinstance(config.executor, RayImpalaSettings)
    assert config.executor.fragment_steps(config.agent) == 32 and config.executor.queue_size == 8
    assert impala("executor.fragment_length=16").executor.fragment_steps(config.agent) == 16


def test_settings_errors_name_the_field_and_value():
    msg = error(IMPALA, "executor.queue_size=0")
    assert "'executor.queue_size' = 0" in msg and "greater than 0" in msg and "ray_impala" in msg
    msg = error(IMPALA, "executor.learner_batch_fragments=9")
    assert "'executor.learner_batch_fragments' = 9 is larger than 'executor.queue_size' = 8" in msg
    msg = error(IMPALA, "executor.fragments_in_flight=0")
    assert "'executor.fragments_in_flight' = 0" in msg
    msg = error(IMPALA, "executor.queue_sise=4")
    assert "'executor.queue_sise' is not a known field" in msg and "did you mean 'queue_size'?" in msg


def test_a_recurrent_fragment_must_be_whole_sequences():
    """Workers ship the state at each sequence start of their fragments: a fragment_length that is
    not a multiple of network.seq_len is refused in one paragraph; a multiple passes."""
    lstm = ["agent.network={type: lstm, units: 8, seq_len: 8}"]
    msg = error(IMPALA, *lstm, "executor.fragment_length=12")
    assert "'executor.fragment_length' = 12 is not a whole number of sequences of 'agent.network.seq_len' = 8" in msg
    assert "(e.g. 8)" in msg
    assert impala(*lstm, "executor.fragment_length=16").executor.fragment_steps(impala(*lstm).agent) == 16


@pytest.mark.parametrize("name, agent", [("ppo_cartpole_ray", "ppo"), ("apex_cartpole", "dqn")])
def test_non_impala_agents_are_refused_naming_the_supported_ones(name, agent):
    msg = error(load_shipped_config(name), "train.executor=ray_impala", "executor={}")
    assert f"agent.type '{agent}' is not one" in msg and "(impala)" in msg and "ray_sync" in msg


def test_plugin_listing_shows_ray_impala_without_importing_ray():
    code = (
        "import sys; from rlgraph_core.cli import main; main(['plugins']); "
        "from rlgraph_core.config.run import load_shipped_config, validate_config; "
        "validate_config(load_shipped_config('impala_cartpole_ray')); "
        "print('RAY_IMPORTED', 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "rlgraph-ray" in lines["ray_impala"]
    assert "RAY_IMPORTED False" in out


# ---------------------------------------------------------------- runs (one Ray session)
DISTRIBUTED = {"staleness", "staleness_max", "queue_fill", "worker_restarts", "samples_lost"}
DISTRIBUTED |= {"env_steps_per_s", "updates_per_s", "worker_0_samples_per_s", "worker_1_samples_per_s"}


def test_impala_reaches_475_on_cartpole_with_two_workers(ray_session, tmp_path):
    from rlgraph_core.assemble import train

    # Asynchronous: the policy lag depends on process timing, so runs differ. With the config's
    # learning rate (5e-4) ten seeds here first showed 475 at 24-40k env steps; the 100k budget is
    # the config's (with 1e-3, one CI run never showed 475 by 100k: the eval return fell 500 -> 73).
    summary = train(impala("train.total_timesteps=100000"), tmp_path)
    assert summary["ended_by"] == "target_return", summary
    assert summary["eval_return_mean"] >= 475 and summary["timesteps"] <= 100000
    assert summary["num_workers"] == 2 and summary["worker_restarts"] == 0 and summary["samples_lost"] == 0
    assert 0 <= summary["staleness_mean"] <= summary["staleness_max"]
    logged = rows(tmp_path)
    assert DISTRIBUTED <= set(logged[-1])
    assert all(0 <= r["queue_fill"] <= 8 for r in logged)  # executor.queue_size bounds the queue
    assert all(0 <= r["staleness"] <= r["staleness_max"] for r in logged if r["staleness"] is not None)
    # asynchronous: some batches were collected with older weights than the learner's
    assert summary["staleness_max"] > 0
    assert (tmp_path / "learning_curve.png").is_file() and (tmp_path / "checkpoint" / "meta.json").is_file()
    assert json.loads((tmp_path / "summary.json").read_text())["staleness_max"] == summary["staleness_max"]


def test_impala_tf_static_workers_and_learner_train_together(ray_session, tmp_path):
    """The wiring on the other backend and paradigm, cheaply (CI): tf.function workers send fragments,
    the tf.function learner updates, weights flow back. The learning run below is heavy."""
    pytest.importorskip("tensorflow")
    from rlgraph_core.assemble import train

    summary = train(
        impala("train.backend=tf", "train.mode=static", "train.total_timesteps=2048", "train.target_return=null"),
        tmp_path,
    )
    assert summary["ended_by"] == "total_timesteps", summary
    assert summary["worker_backend"] == "tf" and summary["updates"] > 0
    assert summary["weights_version_published"] > 0


@pytest.mark.heavy  # 29 s of a CI worker (2026-12-05); the torch run above learns in every CI run
def test_impala_on_tf_static_with_two_workers(ray_session, tmp_path):
    """The same config on the other backend and paradigm: tf.function learner and workers."""
    pytest.importorskip("tensorflow")
    from rlgraph_core.assemble import train

    # Asynchronous: the policy lag depends on process timing, so runs differ, and IMPALA's eval return
    # swings on the way up (five quiet runs: 406 -> 87, 306 -> 97, 364 -> 62 between two evals; 475 came
    # at 20-49k env steps, and one CI run never showed it by 100k). This test is about the backend and
    # paradigm, and the torch test above keeps 475; here 300 (first reached at 16-28k in those runs).
    summary = train(
        impala("train.backend=tf", "train.mode=static", "train.target_return=300", "train.total_timesteps=60000"),
        tmp_path,
    )
    assert summary["ended_by"] == "target_return", summary
    assert summary["eval_return_mean"] >= 300 and summary["timesteps"] <= 60000


class WorkerKiller:
    """Kills worker 0 (as a crash Ray could restart) at the first metrics row; at the end of the
    run (workers still alive) reads the weights version its replacement acts with."""

    def __init__(self, ray):
        self.ray, self.names, self.killed = ray, [], None
        self.version_at_kill, self.replacement_version = None, None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["workers"]

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        if self.killed is None:
            self.killed = self.names[0]
            self.version_at_kill = metrics["updates"]
            self.ray.kill(self.ray.get_actor(self.killed), no_restart=False)

    @hookimpl
    def rlgraph_on_train_end(self, summary):
        replacement = self.ray.get_actor(self.killed[: -len("-0")] + "-1")  # generation 1 of worker 0
        self.replacement_version = self.ray.get(replacement.weights_version.remote())


def test_a_killed_impala_worker_is_restarted_and_its_fragment_dropped(ray_session, tmp_path):
    from rlgraph_core.assemble import train

    pm = PluginManager()
    killer = WorkerKiller(ray_session)
    pm.register(killer, "worker-killer")
    config = impala(
        "train.total_timesteps=4096", "train.log_interval=1024", "train.eval_interval=100000",
        "executor.fragments_in_flight=1",
    )  # fmt: skip
    summary = train(config, tmp_path, plugin_manager=pm)
    assert killer.killed is not None
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 4096
    # exactly the one fragment (32 steps x 4 envs) it had been asked for is lost
    assert summary["worker_restarts"] == 1 and summary["samples_lost"] == 32 * 4
    # the replacement acts with weights published after the kill, not its own initial ones
    assert killer.replacement_version >= killer.version_at_kill and killer.replacement_version > 0
    assert killer.replacement_version <= summary["updates"]
    assert rows(tmp_path)[-1]["worker_restarts"] == 1
    totals = {"worker_restarts", "samples_lost", "staleness_mean", "staleness_max", "num_workers", "updates_per_s"}
    assert totals <= set(json.loads((tmp_path / "summary.json").read_text()))


class WorkerFreezer:
    """At the first metrics row: freeze worker 0's process (SIGSTOP: a hung env); thaw it at the end."""

    def __init__(self, ray):
        self.ray, self.names, self.pid = ray, [], None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["workers"]

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        import os
        import signal

        if self.pid is None:
            worker = self.ray.get_actor(self.names[0])
            self.pid = self.ray.get(worker.__ray_call__.remote(lambda self: os.getpid()))
            os.kill(self.pid, signal.SIGSTOP)


class StopAfterTheRestart:
    """A callback that ends the run once a metrics row shows the hung worker's restart and at
    least 16k env steps are done. A fixed budget raced the timeout: on a quiet machine worker 1
    alone finished 16k env steps before the frozen one's 1.5 s ran out (restarts: 0)."""

    def on_step(self, run):
        return not ((run.last_row or {}).get("worker_restarts", 0) >= 1 and run.timesteps >= 16384)


def test_a_hung_impala_worker_is_restarted_after_sample_timeout_s(ray_session, tmp_path):
    """Issue 19: ray_impala had no sample_timeout_s, so a hung worker held its queue slots for ever."""
    import os
    import signal

    from rlgraph_core.assemble import assemble

    pm = PluginManager()
    freezer = WorkerFreezer(ray_session)
    pm.register(freezer, "worker-freezer")
    config = impala(
        "train.total_timesteps=400000", "train.log_interval=1024", "train.eval_interval=1000000",
        "executor.fragments_in_flight=1", "executor.sample_timeout_s=1.5",
    )  # fmt: skip
    assembly = assemble(config, pm)
    assembly.callbacks.append(StopAfterTheRestart())
    try:
        summary = assembly.executor_class(config, tmp_path, assembly=assembly).run()
    finally:
        if freezer.pid is not None:
            try:
                os.kill(freezer.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert freezer.pid is not None
    assert summary["ended_by"] == "callback" and 16384 <= summary["timesteps"] < 400000, summary
    assert summary["worker_restarts"] == 1 and summary["samples_lost"] == 32 * 4


RECALL = {"agent": {"type": "impala"}, "env": {"id": "rlgraph_core.testing.memory_env:RecallCue", "num_envs": 8}}


@pytest.mark.heavy  # 70 s here with the Ray start (load ~7); the local learner and the fragments' layout are CI's
def test_lstm_impala_learns_the_memory_task_with_two_asynchronous_workers(ray_session, tmp_path):
    """Two ray_impala workers ship each fragment with the states its sequences started from; the
    learner unrolls them and V-trace corrects the lag: RecallCue (a feed-forward policy can only
    guess, 0.5) is solved (measured: eval 1.0 at 1,024 env steps, lag up to 7 updates)."""
    from rlgraph_core.assemble import train

    config = validate_config(
        apply_overrides(
            RECALL,
            QUIET
            + [
                "agent.network={type: lstm, units: 16, encoder: {hidden: []}, seq_len: 8}",
                "agent.n_steps=8",
                "agent.ent_coef=0.01",
                "agent.optimizer={learning_rate: 0.002}",
                "train.backend=torch",
                "train.executor=ray_impala",
                "train.total_timesteps=4096",
                "train.eval_interval=1024",
                "train.eval_episodes=50",
                "train.log_interval=1024",
                "train.target_return=0.95",
                "executor={num_workers: 2, learner_batch_fragments: 1}",
            ],
        )
    )
    summary = train(config, tmp_path)
    assert summary["ended_by"] == "target_return" and summary["best_eval_return"] >= 0.95, summary
    assert summary["samples_lost"] == 0 and summary["staleness_max"] > 0
