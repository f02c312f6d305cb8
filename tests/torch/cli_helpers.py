"""Running the ``rlgraph`` CLI in-process and checking its one-paragraph user errors."""

from __future__ import annotations

import contextlib
import io

from rlgraph_core.cli import main


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``rlgraph ARGV`` in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def assert_user_error(code: int, stderr: str, *fragments: str) -> str:
    """Exit code 2 and a single 'rlgraph: error:' paragraph without a traceback; returns it."""
    assert code == 2, stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.strip().splitlines() if line.startswith("rlgraph: error:")]
    assert len(errors) == 1, stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]
