"""The command line: ``python -m nautograd bench|warmup|info`` (tiny sizes: no timing asserted)."""

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import nautograd as ng
from nautograd import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import run as bench_run  # noqa: E402
from benchmarks.programs import PROGRAMS  # noqa: E402

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
INSTALLED_PEERS = [p for p in ("torch", "jax") if importlib.util.find_spec(p) is not None]


def _nautograd(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "nautograd", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
    )


def _check_summary(s):
    assert set(s) >= {"median_s", "min_s", "max_s", "first_call_s", "times_s"}
    assert s["times_s"] and all(t > 0 for t in s["times_s"])
    assert s["min_s"] <= s["median_s"] <= s["max_s"]


def test_bench_tiny_writes_results_json_and_chart(tmp_path):
    out = tmp_path / "out"
    proc = _nautograd("bench", "--size", "tiny", "--reps", "2", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    meta = result["meta"]
    assert meta["schema"] == bench_run.SCHEMA
    assert meta["size"] == "tiny" and meta["reps"] == 2
    assert meta["versions"]["nautograd"] == ng.__version__
    assert set(meta["versions"]) >= {"nautograd", "numba", "numpy", *INSTALLED_PEERS}
    assert set(meta["peers_missing"]) == {"torch", "jax"} - set(INSTALLED_PEERS)
    names = [w["name"] for w in result["workloads"]]
    programs = [bench_run.PROGRAM_PREFIX + p for p in PROGRAMS]
    assert names == [
        "scalar_dag_fwd_bwd[200]",
        "scalar_dag_bwd[200]",
        "rnn_chain_fwd_bwd[T=20]",
        "mlp_step[8x32-16-16-10,f32]",
        "custom_function_chain[20]",
        "hessian_vector_product[8x8-16-1]",
        *programs,
    ]
    for w in result["workloads"]:
        # the research programs are written against torch's API: no jax
        peers = [p for p in INSTALLED_PEERS if p != "jax" or w["name"] not in programs]
        assert set(w["results"]) == {"nautograd", *peers}
        for s in w["results"].values():
            _check_summary(s)
        assert set(w["ratios"]) == set(peers)
        for p, r in w["ratios"].items():
            assert r == pytest.approx(
                w["results"][p]["median_s"] / w["results"]["nautograd"]["median_s"]
            )
    assert result["startup"]["in_process_s"] > 0
    if "torch" in INSTALLED_PEERS:
        summary = result["programs"]["torch"]
        assert (
            summary["count"] == len(PROGRAMS) and summary["min_ratio"] <= summary["geomean_ratio"]
        )
    # the table names every workload and peer
    for name in names:
        assert name in proc.stdout
    assert (out / "ratios.png").exists() == HAS_MATPLOTLIB
    if HAS_MATPLOTLIB:
        assert (out / "ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_threads_reexecutes_with_openblas_threads(tmp_path):
    proc = _nautograd(
        "bench", "--size", "tiny", "--only", "rnn", "--threads", "1", "--peers", "nautograd",
        "--out", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["meta"]["threads"] == 1
    assert result["meta"]["openblas_threads"] == "1"
    assert [w["name"] for w in result["workloads"]] == ["rnn_chain_fwd_bwd[T=20]"]
    assert result["meta"]["peers_missing"] == {}
    assert list(result["workloads"][0]["results"]) == ["nautograd"]


def test_bench_only_matching_nothing_exits_2(tmp_path):
    code = bench_run.bench_command(
        size="tiny", only="no-such-workload", peers=["nautograd"], out=str(tmp_path)
    )
    assert code == 2
    assert not (tmp_path / "results.json").exists()


def test_bench_ctrl_c_prints_and_writes_what_finished(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_run_workload(per_peer, reps, bar=None):
        calls.append(per_peer)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return {p: bench_run._summary([0.002, 0.001, 0.003], 0.5) for p in per_peer}

    monkeypatch.setattr(bench_run, "run_workload", fake_run_workload)
    code = bench_run.bench_command(size="tiny", peers=["nautograd"], out=str(tmp_path))
    assert code == 130
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["meta"]["interrupted"] is True
    assert [w["name"] for w in result["workloads"]] == ["scalar_dag_fwd_bwd[200]"]
    assert result["startup"] is None
    out = capsys.readouterr().out
    assert f"interrupted: 1 of {6 + len(PROGRAMS)} workloads finished" in out
    assert "scalar_dag_fwd_bwd[200]" in out and "2.000 ms" in out


def test_bench_times_jax_after_every_other_peers_workloads(tmp_path, monkeypatch):
    # jax's eager runs leave XLA's thread pools in the process, which slowed torch's scalar
    # DAG 153 -> 188 ms: its workloads run after all of nautograd's and torch's
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    calls = []

    def fake_run_workload(per_peer, reps, bar=None):
        calls.append(tuple(per_peer))
        times = [0.004, 0.002, 0.006] if "jax" in per_peer else [0.002, 0.001, 0.003]
        return {p: bench_run._summary(times, 0.5) for p in per_peer}

    monkeypatch.setattr(bench_run, "run_workload", fake_run_workload)
    monkeypatch.setattr(bench_run, "first_backward_in_new_process", lambda reps: None)
    code = bench_run.bench_command(size="tiny", out=str(tmp_path))
    assert code == 0
    assert calls == [("nautograd", "torch")] * (6 + len(PROGRAMS)) + [("jax",)] * 6
    result = json.loads((tmp_path / "results.json").read_text())
    for w in result["workloads"][:6]:
        assert list(w["results"]) == ["nautograd", "torch", "jax"]
        assert w["ratios"] == {"torch": 1.0, "jax": 2.0}
    for w in result["workloads"][6:]:
        assert list(w["results"]) == ["nautograd", "torch"]


def test_format_table_has_a_ratio_per_peer():
    s = bench_run._summary
    workloads = [
        {
            "name": "w",
            "results": {"nautograd": s([0.001], 1.0), "torch": s([0.004], 0.1)},
            "ratios": {"torch": 4.0},
        }
    ]
    table = bench_run.format_table(workloads)
    assert "4.00x" in table and "nautograd" in table and "torch" in table


def test_warmup_caches_every_kernel():
    seconds = cli.warmup(quiet=True)
    assert seconds > 0
    cached, total = cli.cached_kernels()
    assert cached == total > 0
    d = cli.info()
    assert d["cache_warm"] is True
    assert os.path.isdir(d["cache_dir"])


def test_info_command_prints_versions_and_cache(tmp_path):
    proc = _nautograd("info", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import numba
    import numpy

    for key, value in (("nautograd", ng.__version__), ("numba", numba.__version__),
                       ("numpy", numpy.__version__)):  # fmt: skip
        assert any(line.split() == [key, value] for line in proc.stdout.splitlines()), key
    assert "cache_dir" in proc.stdout and "numba_threads" in proc.stdout


def test_console_script_is_declared():
    eps = importlib.metadata.entry_points(group="console_scripts")
    assert any(ep.name == "nautograd" and ep.value == "nautograd.cli:main" for ep in eps)


def test_write_bytecode_leaves_a_pyc_for_every_module():
    assert cli.write_bytecode() is True
    package = os.path.dirname(ng.__file__)
    sources = [os.path.join(d, f) for d, _, fs in os.walk(package) for f in fs if f.endswith(".py")]
    assert sources and all(os.path.exists(importlib.util.cache_from_source(s)) for s in sources)
