"""A real Prometheus server loaded with synthetic series, for the usage-collection tests and benchmark.

Series are written as OpenMetrics, turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`,
and served by `prometheus` on a free loopback port from a temporary data directory (Debian's `prometheus`
package provides both binaries).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

# Backfilled blocks carry no staleness markers, so a series that ends (a pod stops, a hostname label is renamed)
# would stay visible for the default 5-minute lookback. Samples here are one a minute on the minute, and the
# collector samples on the minute, so a 30-second lookback reads exactly the sample of that minute, as staleness
# markers make a scraping Prometheus do.
LOOKBACK = "30s"

Sample = tuple[float, float]  # (unix seconds, value)
Series = tuple[dict[str, str], Iterable[Sample]]


def binaries() -> tuple[str, str] | None:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    return (prometheus, promtool) if prometheus and promtool else None


def _labels(labels: dict[str, str]) -> str:
    escaped = (f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
               for k, v in sorted(labels.items()))
    return "{" + ",".join(escaped) + "}"


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def write_openmetrics(path: Path, families: dict[str, Iterable[Series]]) -> int:
    """Write gauge families (each family's series together, samples in time order); returns the sample count."""
    count = 0
    with open(path, "w") as out:
        for name, series in families.items():
            out.write(f"# TYPE {name} gauge\n")
            for labels, samples in series:
                prefix = f"{name}{_labels(labels)} "
                lines = [f"{prefix}{_value(v)} {t:.3f}\n" for t, v in samples]
                out.writelines(lines)
                count += len(lines)
        out.write("# EOF\n")
    return count


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def prometheus_server(openmetrics: Path, *, start_timeout: float = 60) -> Iterator[str]:
    """Build blocks from the file, serve them, yield the base URL; the server and its data go away after."""
    found = binaries()
    if found is None:
        raise FileNotFoundError("prometheus and promtool are not installed (Debian package 'prometheus')")
    prometheus, promtool = found
    with tempfile.TemporaryDirectory(prefix="prometheus-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        built = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(openmetrics),
                                str(data)], capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"promtool could not build blocks: {built.stderr.strip() or built.stdout.strip()}")
        config = Path(tmp) / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log = open(Path(tmp) / "prometheus.log", "w")
        process = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}",
             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}",
             f"--query.lookback-delta={LOOKBACK}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + start_timeout
            while not _ready(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError("prometheus did not become ready: "
                                       + (Path(tmp) / "prometheus.log").read_text()[-2000:])
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers: a Prometheus too slow for any timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def closed_port_url() -> str:
    """A loopback URL nothing listens on: a Prometheus that is down."""
    return f"http://127.0.0.1:{_free_port()}"
