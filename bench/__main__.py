"""`python -m bench [name ...]`: run every bench/bench_*.py (or the named ones) and write bench/RESULTS.md.

Each module exposes `run() -> str`, a Markdown section. Machines here are shared and noisy, so every section
reports ratios measured within one run next to the absolute figures.
"""

import importlib
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if names:
        modules = [m for m in modules if m.removeprefix("bench_") in names or m in names]
    sections = []
    for name in modules:
        started = time.perf_counter()
        print(f"running {name} ...", flush=True)
        section = importlib.import_module(f"bench.{name}").run()
        sections.append(section.strip() + f"\n\n_{name} took {time.perf_counter() - started:.0f} s._\n")
    header = (
        "# Benchmark results\n\n"
        f"Written by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs. Compare ratios, not absolute times: the machines are shared and noisy.\n"
    )
    (HERE / "RESULTS.md").write_text(header + "\n" + "\n".join(sections))
    print(f"wrote {HERE / 'RESULTS.md'}")


if __name__ == "__main__":
    main(sys.argv[1:])
