"""`ctune doctor --fix` finds and removes a stale git lock left by a crashed writer."""

import os
import subprocess
import sys
import time


def test_doctor_reports_then_fixes_a_stale_index_lock(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "registry").mkdir()
    lock = tmp_path / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    env = {**os.environ, "CTUNE_REGISTRY": str(tmp_path / "registry")}

    def doctor(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ctune", "doctor", *extra],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )

    report = doctor()
    assert "stale git lock" in report.stdout and "ctune doctor --fix" in report.stdout
    assert lock.exists()
    fixed = doctor("--fix")
    assert "removed" in fixed.stdout and not lock.exists()
