"""`python -m sandbox serve` as a separate process: kubeconfig, faults over HTTP, state across restarts."""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

ROOT = Path(__file__).resolve().parents[2]


def _serve(port, tmp_path, *extra):
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", str(port),
                                "--kubeconfig", str(kubeconfig), *extra],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line:
        process.kill()
        pytest.fail(f"the standalone sandbox did not start: {process.stderr.read()}")
    assert line.strip() == f"sandbox serving on http://127.0.0.1:{port}"
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    configuration.retries = 0
    return process, client.ApiClient(configuration)


def _stop(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0


def test_faults_driven_from_another_process(free_port, tmp_path):
    process, api = _serve(free_port, tmp_path)
    try:
        url = api.configuration.host
        request = urllib.request.Request(f"{url}/_sandbox/faults", method="POST",
                                         data=json.dumps({"verb": "create", "resource": "namespaces", "status": 503,
                                                          "reason": "ServiceUnavailable", "count": 1}).encode())
        assert json.loads(urllib.request.urlopen(request, timeout=5).read())["id"]
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as exc:
            core.create_namespace({"metadata": {"name": "team"}})
        assert exc.value.status == 503
        core.create_namespace({"metadata": {"name": "team"}})
        stats = json.loads(urllib.request.urlopen(f"{url}/_sandbox/stats", timeout=5).read())
        assert stats["by_verb"]["create"] == 2 and stats["writes"] == 1
    finally:
        _stop(process)


def test_state_file_survives_restart(free_port, tmp_path):
    state = tmp_path / "state.json"
    process, api = _serve(free_port, tmp_path, "--state", str(state))
    try:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "demo"}})
        core.create_namespaced_config_map("demo", {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    finally:
        _stop(process)
    assert state.exists()
    process, api = _serve(free_port, tmp_path, "--state", str(state))
    try:
        core = client.CoreV1Api(api)
        kept = core.read_namespaced_config_map("cfg", "demo")
        assert kept.data == {"a": "1"}
        created = core.create_namespaced_config_map("demo", {"metadata": {"name": "next"}})
        assert int(created.metadata.resource_version) > int(kept.metadata.resource_version)
    finally:
        _stop(process)


def test_a_storm_of_stop_signals_stops_it_once_and_cleanly(free_port, tmp_path):
    """`make run` stops its process group with `kill 0`, which can reach a sandbox many times over while it stops."""
    import os

    state = tmp_path / "state.json"
    process, api = _serve(free_port, tmp_path, "--state", str(state))
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "kept"}})
    for _ in range(2000):
        try:
            os.kill(process.pid, signal.SIGTERM if _ % 2 else signal.SIGINT)
        except ProcessLookupError:
            break
    assert process.wait(timeout=20) == 0
    assert "Traceback" not in process.stderr.read()
    assert "kept" in state.read_text()
