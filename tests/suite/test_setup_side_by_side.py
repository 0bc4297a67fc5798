"""Two set-ups on one machine (two checkouts) share the cache: each thing is built
once, the second set-up waits for the first and finds it cached (ci/cache-lock.sh).

The build itself is stood in for by a fake ``go`` on PATH that takes a second and
counts its runs; the script, its lock and its cache check are the real ones.
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
sleep 1
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
        "KIND_VERSION": "v0.0.0-test",
    }
    script = REPO / "ci" / "kind" / "build-kind.sh"
    both = [
        subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in both]
    for code, out, err in results:
        assert code == 0, err
        assert out.strip().endswith("kind-v0.0.0-test/bin/kind"), out
    assert runs.read_text().splitlines() == ["run"], "the kind CLI was built more than once"
    assert any("another set-up is building kind-v0.0.0-test; waiting for it" in err for _, _, err in results)
