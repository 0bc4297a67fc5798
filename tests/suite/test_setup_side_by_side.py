"""Two set-ups on one machine (two checkouts) share the cache: each thing is built
once, the second set-up waits for the first and finds it cached (ci/cache-lock.sh).

The build itself is stood in for by a fake ``go`` on PATH that lasts until the other
set-up waits for it and counts its runs; the script, its lock and its cache check are the real ones.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FAKE_GO = """#!/bin/sh
# go install sigs.k8s.io/kind@V, as the build script calls it: a kind binary in GOBIN.
echo run >> "$RUNS"
# Build until the other set-up has said it waits (a loaded machine may start it late),
# at most 30 s; a lock that does not hold shows as a second run.
n=0
until grep -qs "waiting for it" "$ERRS"/*.err || [ $n -ge 300 ]; do sleep 0.1; n=$((n+1)); done
printf '#!/bin/sh\\necho kind fake\\n' > "$GOBIN/kind"
chmod +x "$GOBIN/kind"
"""


def test_two_kind_builds_at_once_build_once_and_both_get_the_binary(tmp_path):
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(stat.S_IRWXU)
    runs = tmp_path / "runs"
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "GPUSHARE_CACHE": str(tmp_path / "cache"),
        "RUNS": str(runs),
        "ERRS": str(tmp_path),
        "KIND_VERSION": "v0.0.0-test",
    }
    script = REPO / "ci" / "kind" / "build-kind.sh"
    errs = [tmp_path / f"setup-{n}.err" for n in range(2)]
    both = []
    for err in errs:
        with err.open("w") as stderr:
            both.append(subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=stderr))
    results = [(p.wait(timeout=60), p.communicate()[0].decode(), err.read_text()) for p, err in zip(both, errs)]
    for code, out, err in results:
        assert code == 0, err
        assert out.strip().endswith("kind-v0.0.0-test/bin/kind"), out
    assert runs.read_text().splitlines() == ["run"], "the kind CLI was built more than once"
    assert any("another set-up is building kind-v0.0.0-test; waiting for it" in err for _, _, err in results)
