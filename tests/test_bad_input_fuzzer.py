"""The bad-input fuzzer (tests/fuzz_bad_inputs.py) over every op of the table, in a process of
its own: a crash fails this test (naming the example in flight) instead of ending the run."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_bad_inputs_give_a_clear_exception_or_torchs_result(tmp_path):
    log = tmp_path / "examples.log"
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, "fuzz_bad_inputs.py"), "--examples", "6",
         "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=1800,
    )  # fmt: skip
    if result.returncode < 0 or (result.returncode != 0 and "outcomes:" not in result.stdout):
        lines = log.read_text().splitlines() if log.exists() else []
        raise AssertionError(
            f"the fuzzer's process died (code {result.returncode}) at: "
            f"{lines[-1] if lines else '?'}\n{result.stderr[-3000:]}"
        )
    assert result.returncode == 0, result.stdout[-6000:]
