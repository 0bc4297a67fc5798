"""Entrypoint of the suite image: run the checks from the pod, as hydrophone expects.

The container runs as uid 65534 with every capability dropped, so everything is written
to ``/tmp/results`` (shared with hydrophone's output container) or a fresh temporary
directory (HOME, TMPDIR, the report). The exit status is pytest's: 0 when every chosen
check passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpushare_conformance.suiteimage.contract import LOG_FILE, ContractError, pytest_argv

RESULTS = Path("/tmp/results")
WILL_RUN = "Will run "


def main() -> int:
    results = Path(os.environ.get("RESULTS_DIR", str(RESULTS)))
    results.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpushare-suite-"))
    env = dict(os.environ, HOME=str(work), TMPDIR=str(work), PYTHONDONTWRITEBYTECODE="1")
    try:
        argv = pytest_argv(env, results, work)
    except ContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    with open(results / LOG_FILE, "w", encoding="utf-8") as log:
        status = _tee(argv, env, work, log)
        # hydrophone stops following the log when it sees this line.
        final = f"Ginkgo ran 1 suite in {time.monotonic() - started:.1f}s (gpushare-conformance, pytest exit {status})"
        print(final, flush=True)
        log.write(final + "\n")
    return status


def _tee(argv: list[str], env: dict[str, str], cwd: Path, log) -> int:
    """Run ``argv``, copying its output to stdout and ``log``; the log starts at the
    ``Will run`` line (hydrophone reads the log's first lines for it), what came
    before follows it."""
    before: list[str] | None = []
    child = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert child.stdout is not None
    for line in child.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if before is not None:
            if not line.startswith(WILL_RUN):
                before.append(line)
                continue
            log.write(line)
            log.writelines(before)
            before = None
        else:
            log.write(line)
        log.flush()
    if before:
        log.writelines(before)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
