"""The ``rlgraph`` command line: train, evaluate, plugins, config, graph."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from rlgraph_core.api import Algorithm
from rlgraph_core.assemble import assemble
from rlgraph_core.checkpoint import read_meta
from rlgraph_core.components.settings import ExplorationSettings, NetworkSettings, component_entry
from rlgraph_core.config.run import RunConfig, apply_overrides, resolve_config, validate_config
from rlgraph_core.config.wrappers import resolve_wrappers
from rlgraph_core.envs import check_stored_env_id, make_eval_env
from rlgraph_core.errors import PluginError, RLGraphError
from rlgraph_core.evaluation import agent_policy, evaluate_policy
from rlgraph_core.execution.dry_run import dry_run
from rlgraph_core.execution.out_dir import check_out_dir, check_out_file
from rlgraph_core.execution.run_dir import resume_checkpoint, run_dir_of
from rlgraph_core.execution.stopping import EXIT_CODES, RunFailed, final_phase_held
from rlgraph_core.export.onnx_policy import OnnxPolicy, export_checkpoint
from rlgraph_core.graph.drawing import write_graph
from rlgraph_core.integrations.video import VideoWriter, check_video_path
from rlgraph_core.plugins import KINDS, get_plugin_manager
from rlgraph_core.plugins.manager import DISABLE_ENV, block_hint, disabled_from_env, parse_plugin_names
from rlgraph_core.training import default_out_dir, end_line, run_training
from rlgraph_core.training import resolve_resume as resolve
from rlgraph_core.warning_lines import warning_lines
from rlgraph_core.install_hints import extra_install_command

#: Flags that override a config field (on a new run and on a resumed one alike).
FLAG_FIELDS = (
    ("backend", "train.backend"),
    ("mode", "train.mode"),
    ("executor", "train.executor"),
    ("device", "train.device"),
    ("seed", "train.seed"),
)


def _overrides(args) -> list[str]:
    """``--set`` items plus the shortcut flags, as ``key=value`` overrides."""
    overrides = list(args.set or [])
    for flag, key in FLAG_FIELDS:
        value = getattr(args, flag, None)
        if value is not None:
            overrides.append(f"{key}={value}")
    return overrides


def _resolve_config(args) -> RunConfig:
    """The run config of a command's CONFIG argument, ``--set`` items and shortcut flags."""
    return resolve_config(getattr(args, "config", None), _overrides(args))


def resolve_resume(path: str | Path) -> Path:
    """The checkpoint ``--resume PATH`` means (see :func:`rlgraph_core.training.resolve_resume`)."""

    return resolve(path)


def cmd_train(args) -> int:
    """Train an agent; the default (no CONFIG) is DQN on CartPole-v1 with torch.

    A thin layer over :func:`rlgraph_core.training.run_training`, the function the Python facade's
    ``learn`` uses too (folder check and lock, resume trimming, the final line).

    Exit codes: 0 when the run used its budget, reached its target or a callback stopped it, 130
    after Ctrl-C, 143 after SIGTERM (both after a final checkpoint), 1 when the environment, the
    agent or a plugin raised (after a final checkpoint), 2 for a user mistake (nothing run).
    """

    if args.out is not None:
        check_out_dir(args.out)
    resume = None
    if args.resume:
        if args.config:
            raise RLGraphError(
                "Pass either a CONFIG or --resume DIR, not both: a resumed run uses the config stored in its "
                "checkpoint (change fields with --set, --backend, --mode, --seed ...)."
            )
        resume = resolve_resume(args.resume)
        _, stored = read_meta(resume)
        raw = apply_overrides(stored, _overrides(args))
        if (raw.get("train") or {}).get("executor", "local") != (stored.get("train") or {}).get("executor", "local"):
            # Another executor (an offline run fine-tuned online: --executor local), as rl.load does:
            # the stored executor section held the old executor's settings, so it does not carry over.
            raw = apply_overrides({k: v for k, v in stored.items() if k != "executor"}, _overrides(args))
        _check_stored_env(stored, raw, args, f"the checkpoint '{resume}'", "--set env.id=ID")
        config = validate_config(raw)
    else:
        config = _resolve_config(args)
    if args.no_progress:
        config.train.progress_bar = False
    resumed_run = run_dir_of(resume) if resume is not None else None
    out = Path(args.out) if args.out is not None else (resumed_run or default_out_dir(config))
    assembly = assemble(config, get_plugin_manager())
    if args.dry_run:
        print(dry_run(assembly, out, resume_dir=resume))
        return 0
    with final_phase_held():  # a signal during the run's final phase waits until the last line is out
        return _train_and_report(config, out, args, assembly)


def _train_and_report(config, out: Path, args, assembly) -> int:
    """``run_training`` and the run's last line (or the failure paragraph); the exit code."""

    try:
        # The run folder, not the checkpoint chosen above: run_training chooses again under the
        # folder's lock (a run still writing there until then may have saved a newer one).
        summary = run_training(
            config, out, resume=args.resume or None, overwrite=args.overwrite, assembly=assembly, announce=print
        )
    except RunFailed as exc:
        summary = exc.summary
        if summary.get("checkpoint") is None:  # a process that does not own the folder
            return EXIT_CODES["error"]
        print(
            f"rlgraph: the run failed: {summary['error']} (at {summary['timesteps']} env steps). The work so far "
            f"is saved: checkpoint {summary['checkpoint']}, summary.json in {out} (with the traceback). "
            f"Resume with: rlgraph train --resume {out}",
            file=sys.stderr,
        )
        return EXIT_CODES["error"]
    ended = summary.get("ended_by", "total_timesteps")
    owns_out_dir = getattr(assembly.executor_class, "owns_out_dir", None)
    if owns_out_dir is not None and not owns_out_dir():
        return EXIT_CODES.get(ended, 0)
    print(end_line(summary))
    if EXIT_CODES.get(ended, 0):
        print(f"rlgraph: resume with: rlgraph train --resume {out}", file=sys.stderr)
    return EXIT_CODES.get(ended, 0)


def _check_stored_env(stored: dict, raw: dict, args, source: str, named: str) -> None:
    """Refuse a checkpoint's env module from the current folder (checkpoints are inert) unless the
    user consented: ``--trust-env-module``, or an ``env.id`` of their own (``named``, ``--set env.id=``)."""

    stored_id = (stored.get("env") or {}).get("id") if isinstance(stored.get("env"), dict) else None
    chosen = (raw.get("env") or {}).get("id") if isinstance(raw.get("env"), dict) else None
    if getattr(args, "trust_env_module", False) or chosen != stored_id:
        return
    consent = f"pass --trust-env-module (or name the environment yourself: {named} or --set env.id=ID)"
    check_stored_env_id(stored_id, source, consent)


def _checkpoint_arg(path: str) -> str:
    """The checkpoint a CLI argument means: a run folder (``--out`` of ``rlgraph train``) means its
    newest checkpoint, as for ``--resume``; a folder that is neither is refused; anything else is
    passed on unchanged (and refused, if it is no checkpoint, by the code that reads it)."""
    folder = Path(path)
    if folder.is_dir() and not (folder / "meta.json").is_file():
        best = resume_checkpoint(folder, argument="checkpoint")
        print(f"rlgraph: '{folder}' is a run folder; using its newest checkpoint {best}", file=sys.stderr)
        return str(best)
    return path


def cmd_evaluate(args) -> int:
    """Evaluate a checkpoint, a run folder's newest checkpoint, or an exported ``.onnx`` policy with
    the greedy policy.

    The agent is the facade's (:class:`~rlgraph_core.api.Algorithm`), so the CLI and Python
    evaluate alike. ``--video FILE`` (alias ``--render-to``) streams every frame to a .mp4/.gif
    (or writes the last one to a .png) while evaluating, in constant memory.
    """
    video = args.video
    if video is not None:
        check_video_path(video)
    if str(args.checkpoint).endswith(".onnx"):
        return _evaluate_onnx(args, video)
    args.checkpoint = _checkpoint_arg(args.checkpoint)

    _, stored = read_meta(args.checkpoint)
    overrides = list(args.set or [])
    if args.env is not None:
        overrides.append(f"env.id={args.env}")
    if args.backend:
        overrides.append(f"train.backend={args.backend}")
    if args.mode:
        overrides.append(f"train.mode={args.mode}")
    raw = _without_missing_executor(apply_overrides(stored, overrides))
    _check_stored_env(stored, raw, args, f"the checkpoint '{args.checkpoint}'", "--env ID")
    config = validate_config(raw)
    algo = Algorithm(config, verbose=1)
    algo.agent.load(args.checkpoint, for_training=False)  # weights only; counters are not needed
    env = algo.make_eval_env(render_mode="rgb_array" if video else None)
    seed = 10_000 + config.train.seed if args.seed is None else args.seed
    agent = algo.agent
    if hasattr(env, "agents") and not video:  # a PettingZoo env: the policies' own evaluation
        try:
            result, frames = agent.evaluate(env, args.episodes, seed), 0
        finally:
            env.close()
    else:
        result, frames = _run_evaluation(agent_policy(agent), env, config.env.id, args, seed, video)
    print(
        f"evaluation of {args.checkpoint} ({config.agent.type} on {config.env.id}, backend "
        f"{config.train.backend}): mean return {result['eval_return_mean']:.1f} ± "
        f"{result['eval_return_std']:.1f} over {args.episodes} episodes"
    )
    if "eval_win_rate" in result:
        print(
            f"against the evaluation opponent: won {result['eval_win_rate']:.0%}, drew {result['eval_draw_rate']:.0%}, "
            f"lost {result['eval_loss_rate']:.0%}; illegal moves {int(result['eval_illegal_moves'])}"
        )
    if frames:
        print(f"rendered {frames} frames to {video}")
    return 0


def _without_missing_executor(raw: dict) -> dict:
    """``raw`` to evaluate with: evaluation plays in this process, so a checkpoint trained under an
    executor that is not installed here (``ray_sync`` on a machine without rlgraph-ray) is evaluated as
    a local run (its ``executor:`` section dropped); an installed executor's config is kept as it is."""
    train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
    name = train.get("executor", "local")
    try:
        get_plugin_manager().get("executors", name, field="train.executor")
    except PluginError:
        return {**{k: v for k, v in raw.items() if k != "executor"}, "train": {**train, "executor": "local"}}
    return raw


def _run_evaluation(policy, env, env_id: str, args, seed: int, video: str | None) -> tuple[dict, int]:
    """``evaluate_policy`` with frames streamed to ``video``; closes ``env``; returns (result, frames written)."""
    import gymnasium as gym

    writer = None
    try:
        if video:
            writer = VideoWriter(video, fps=(getattr(env, "metadata", None) or {}).get("render_fps") or 30)
        result = evaluate_policy(policy, env, args.episodes, seed, writer.add if writer else None)
    except gym.error.DependencyNotInstalled as exc:
        # Rendering needs the env's optional extras (e.g. pygame for classic control).
        raise RLGraphError(
            f"--video/--render-to needs rendering support for '{env_id}', which is not installed: {exc} "
            f"({extra_install_command('render')} brings it for the classic-control envs)."
        ) from None
    finally:
        if writer is not None:
            writer.close()
        env.close()
    return result, writer.frames if writer else 0


def _evaluate_onnx(args, video: str | None) -> int:
    """``rlgraph evaluate policy.onnx``: onnxruntime, gymnasium and numpy only (no backend)."""

    for flag in ("backend", "mode", "set"):
        if getattr(args, flag):
            raise RLGraphError(
                f"--{flag} does not apply to an exported .onnx policy (it runs on onnxruntime); "
                f"choose the environment with --env ID."
            )
    policy = OnnxPolicy(args.checkpoint)
    if "rlgraph.policy" in policy.metadata:
        raise RLGraphError(
            f"'{args.checkpoint}' is the policy '{policy.metadata['rlgraph.policy']}' of a multi-agent run on "
            f"{policy.env_id} (its agents: {policy.metadata.get('rlgraph.policy_agents')}); 'rlgraph evaluate' plays "
            f"an exported policy on a single-agent env. Evaluate the run's checkpoint instead ('rlgraph evaluate "
            f"CHECKPOINT'), or run the file with rlgraph_core.export.OnnxPolicy on its agents' observations."
        )
    env_id = args.env or policy.env_id
    if not env_id:
        raise RLGraphError(f"'{args.checkpoint}' does not name its environment; pass --env ID (e.g. CartPole-v1).")
    # the run's own env (kwargs, wrappers) as its evaluations saw it: e.g. an Atari policy reads
    # preprocessed, stacked frames and plays whole games with the unclipped score
    env_cfg = policy.env_config(env_id)
    wrappers = resolve_wrappers(get_plugin_manager(), env_cfg.wrappers, evaluation=True)
    env = make_eval_env(env_cfg, "rgb_array" if video else None, wrappers=wrappers)
    try:
        policy.check_env(env, env_id)
    except RLGraphError:
        env.close()
        raise
    seed = 10_000 if args.seed is None else args.seed
    result, frames = _run_evaluation(policy, env, env_id, args, seed, video)
    print(
        f"evaluation of {args.checkpoint} (onnxruntime, {policy.metadata.get('rlgraph.agent', '?')} on {env_id}): "
        f"mean return {result['eval_return_mean']:.1f} ± {result['eval_return_std']:.1f} over {args.episodes} episodes"
    )
    if frames:
        print(f"rendered {frames} frames to {video}")
    return 0


def cmd_export(args) -> int:
    """Export a checkpoint's greedy policy for serving (``--format onnx``)."""

    out = check_out_file(args.out)  # an existing folder, a read-only or virtual one: before the export's work
    args.checkpoint = _checkpoint_arg(args.checkpoint)

    stored = read_meta(args.checkpoint)[1]
    _check_stored_env(stored, stored, args, f"the checkpoint '{args.checkpoint}'", "--trust-env-module")
    paths = export_checkpoint(args.checkpoint, out)
    if len(paths) == 1 and paths[0] == out:
        print(f"exported the greedy policy of {args.checkpoint} to {out} (ONNX; run it with: rlgraph evaluate {out})")
        return 0
    print(f"exported the greedy policies of the multi-agent run {args.checkpoint}, one ONNX file per policy:")
    for path in paths:
        print(f"  {path}")
    return 0


def cmd_plugins(args) -> int:
    """List every registered name by kind with its distribution and version, then the plugins by
    entry-point name, the blocked plugins and the plugins that failed to load.

    A name that several plugins register is listed once per claimant, followed by a line that
    says how to block one.
    """

    pm = get_plugin_manager()
    for kind in KINDS:
        print(f"{kind}:")
        for name, claims in sorted(pm.claimants(kind).items()):
            for entry in claims:
                note = f"  [contested; entry point '{entry.plugin}']" if len(claims) > 1 else ""
                note += _slot_note(entry.obj) if kind == "components" else ""
                print(f"  {name:<22} {entry.distribution} {entry.version}{note}")
            if len(claims) > 1:
                print(
                    f"    ! '{name}' is claimed by {len(claims)} plugins and cannot be used until "
                    f"all but one are blocked: {block_hint(claims)}"
                )
    print("plugins:")
    for info in pm.plugins():
        print(f"  {info.name:<22} {info.distribution} {info.version}")
    if pm.blocked:
        print("blocked:")
        for info in pm.blocked:
            print(f"  {info.name:<22} {info.distribution} {info.version}")
    if pm.failed:
        print("failed to load:")
        for f in pm.failed:
            print(f"  {f.name:<22} {f.distribution}: {f.error}")
    return 0


def _slot_note(obj) -> str:
    """``  [network slot]`` / ``  [exploration slot]`` for a component registered with such a settings model."""

    _, model = component_entry(obj)
    for base, role in ((NetworkSettings, "network"), (ExplorationSettings, "exploration")):
        if model is not None and issubclass(model, base):
            return f"  [{role} slot]"
    return ""


def cmd_config(args) -> int:
    """Print the fully resolved config (defaults filled in) as YAML."""
    import yaml

    print(yaml.safe_dump(_resolve_config(args).to_dict(), sort_keys=False), end="")
    return 0


def cmd_graph(args) -> int:
    """Build the configured agent and print its component graph and build time, or write it as
    dot text, SVG or PNG (``--format``, ``--out``)."""

    if args.format in ("svg", "png") and args.out is None:
        raise RLGraphError(f"--format {args.format} writes a file: pass --out FILE.{args.format}.")
    config = _resolve_config(args)
    assembly = assemble(config, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(
        getattr(env, "single_observation_space", env.observation_space),
        getattr(env, "single_action_space", env.action_space),
        with_memory=False,
    )
    env.close()
    print(write_graph(agent.build_report, args.format, args.out), end="" if args.out is None else "\n")
    return 0


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse reports anything else as a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


#: What ``--trust-env-module`` does (checkpoints are inert without it).
TRUST_HELP = (
    "import the env module a checkpoint's config names even from the current folder (by default only an "
    "installed distribution or PYTHONPATH may provide it: a checkpoint never runs code on its own)"
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rlgraph`` command."""
    p = argparse.ArgumentParser(prog="rlgraph", description="Design and run deep RL algorithms on any backend.")
    p.add_argument(
        "--disable-plugins",
        action="append",
        metavar="NAMES",
        help="comma-separated plugin (entry-point) names not to load, e.g. example-components; "
        "added to those in RLGRAPH_DISABLE_PLUGINS ('rlgraph plugins' lists the names)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    def run_options(sp, with_config=True):
        if with_config:
            sp.add_argument(
                "config",
                nargs="?",
                help="YAML/JSON config file, an agent name (ppo, dqn, ...: its defaults) or the name of a shipped "
                "config (dqn_cartpole, ppo_cartpole, ...; default: dqn_cartpole, DQN on CartPole-v1 with torch); "
                "the names rl.make() takes",
            )
        sp.add_argument("--backend", help="a registered backend name (rlgraph plugins lists them)")
        sp.add_argument(
            "--mode",
            choices=["eager", "static", "auto"],
            help="eager (define-by-run), static (compiled) or auto (static from train.static_from_timesteps env steps)",
        )
        sp.add_argument("--executor", help="executor name, e.g. local")
        sp.add_argument("--device", help="cpu, cuda, cuda:0 or auto")
        sp.add_argument("--seed", type=int)
        sp.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a config field, e.g. --set agent.memory.capacity=50000",
        )

    t = sub.add_parser("train", help="train an agent")
    run_options(t)
    t.add_argument("--out", help="output folder (metrics.jsonl, learning_curve.png, checkpoint/)")
    t.add_argument(
        "--resume",
        metavar="DIR",
        help="continue a run: its --out folder (newest checkpoint) or a checkpoint folder; flags and --set apply",
    )
    t.add_argument("--overwrite", action="store_true", help="replace the previous run in a non-empty --out folder")
    t.add_argument("--trust-env-module", action="store_true", help=TRUST_HELP)
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, build the agent and the envs, print the plan and exit without training or writing --out",
    )
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("evaluate", help="evaluate a checkpoint or an exported .onnx policy")
    e.add_argument(
        "checkpoint",
        help="checkpoint folder or run folder (its newest checkpoint) written by 'rlgraph train', or a .onnx "
        "file from 'rlgraph export'",
    )
    e.add_argument("--episodes", type=_positive_int, default=10, help="number of episodes (>= 1; default 10)")
    e.add_argument(
        "--video",
        "--render-to",
        dest="video",
        metavar="FILE",
        help="stream the evaluation's frames to a .mp4 or .gif (or the last frame to a .png); extra 'render'",
    )
    e.add_argument("--env", help="environment id to evaluate on (default: the one it was trained on)")
    e.add_argument("--trust-env-module", action="store_true", help=TRUST_HELP)
    e.add_argument("--backend", help="evaluate on another backend than the one that trained")
    e.add_argument("--mode", choices=["eager", "static"])
    e.add_argument("--seed", type=int, help="first evaluation episode seed (default: as in training)")
    e.add_argument("--set", action="append", metavar="KEY=VALUE")
    e.set_defaults(func=cmd_evaluate)

    x = sub.add_parser("export", help="export a checkpoint's greedy policy for serving (ONNX)")
    x.add_argument(
        "checkpoint",
        help="checkpoint folder or run folder (its newest checkpoint) written by 'rlgraph train' (any backend)",
    )
    x.add_argument("--format", choices=["onnx"], default="onnx", help="export format (default onnx; extra 'onnx')")
    x.add_argument("--out", required=True, help="output file, e.g. policy.onnx")
    x.add_argument("--trust-env-module", action="store_true", help=TRUST_HELP)
    x.set_defaults(func=cmd_export)

    _plugin_commands(sub)

    pl = sub.add_parser(
        "plugins",
        help="list registered backends, executors, components, agents, memories, "
        "loggers, and blocked or failed plugins",
    )
    pl.set_defaults(func=cmd_plugins)

    c = sub.add_parser("config", help="print a config with every default filled in")
    run_options(c)
    c.set_defaults(func=cmd_config)

    g = sub.add_parser("graph", help="build a config's agent and print its component graph")
    run_options(g)
    g.add_argument(
        "--format",
        choices=["text", "dot", "svg", "png"],
        default="text",
        help="text (default), Graphviz dot, or svg/png drawn by Graphviz's dot program",
    )
    g.add_argument("--out", help="write to FILE instead of standard output (required for svg and png)")
    g.set_defaults(func=cmd_graph)
    return p


#: Subcommands a plugin provides, with the extra that brings them (named when none does).
PLUGIN_COMMANDS = {"tune": ("hyperparameter search on Ray Tune", "rlgraph-core[tune]")}


def _plugin_commands(sub) -> None:
    """Add the subcommands plugins register (``rlgraph_commands`` hook); a known one that no
    installed plugin provides (``tune``) answers with the extra to install."""

    commands: dict = {}
    try:
        for result in get_plugin_manager().hook.rlgraph_commands():
            commands.update(result or {})
    except Exception as exc:  # a broken plugin must never break the core commands
        print(f"rlgraph: warning: plugin commands unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
    for name, command in commands.items():
        parser = sub.add_parser(name, help=command.help)
        command.add_arguments(parser)
        parser.set_defaults(func=command.run)
    for name, (what, extra) in PLUGIN_COMMANDS.items():
        if name not in commands:
            parser = sub.add_parser(name, help=f"{what} (needs {extra})", add_help=False)
            parser.add_argument("rest", nargs=argparse.REMAINDER)

            def missing(args, name=name, what=what, extra=extra):
                raise RLGraphError(
                    f"'rlgraph {name}' ({what}) is provided by a plugin that is not installed; install it "
                    f"with pip install '{extra}' (from a checkout: pip install -e './rlgraph_core[tune]' -e ./rlgraph_ray)."
                )

            parser.set_defaults(func=missing)


@contextlib.contextmanager
def _plugins_disabled(values: list[str] | None):
    """Add ``--disable-plugins`` names to ``RLGRAPH_DISABLE_PLUGINS`` while a command runs.

    The environment variable is what ``get_plugin_manager`` (and worker processes) read; it is
    restored afterwards so that in-process callers of :func:`main` are not affected.
    """
    if not values:
        yield
        return

    names = disabled_from_env().union(*(parse_plugin_names(v) for v in values))
    before = os.environ.get(DISABLE_ENV)
    os.environ[DISABLE_ENV] = ",".join(sorted(names))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = before


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rlgraph`` command; user mistakes exit 2 with a one-paragraph message."""
    # --disable-plugins applies to the parser too: plugins add subcommands (rlgraph_commands).
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--disable-plugins", action="append")
    known, _ = pre.parse_known_args(argv)

    with _plugins_disabled(known.disable_plugins), warning_lines():
        args = build_parser().parse_args(argv)
        try:
            return args.func(args)
        except RLGraphError as exc:
            print(f"rlgraph: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("rlgraph: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:  # output piped into e.g. `head`, which closed early
            sys.stderr.close()
            return 0


if __name__ == "__main__":
    sys.exit(main())
