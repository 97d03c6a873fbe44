"""`python -m bench [name ...]`: run every bench/bench_*.py (or the named ones) and write bench/RESULTS.md.

Naming benchmarks re-runs only those and keeps the other sections of RESULTS.md as they were.

Each module exposes `run() -> str`, a Markdown section. Machines here are shared and noisy, so every section
reports ratios measured within one run next to the absolute figures.
"""

import importlib
import os
import platform
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


MARK = "<!-- {} -->"


def previous_sections() -> dict[str, str]:
    path = HERE / "RESULTS.md"
    if not path.exists():
        return {}
    parts = re.split(r"^<!-- (bench_\w+) -->$", path.read_text(), flags=re.M)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def main(names: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    selected = [m for m in modules if not names or m.removeprefix("bench_") in names or m in names]
    sections = {m: body for m, body in previous_sections().items() if m in modules}
    for name in selected:
        started = time.perf_counter()
        print(f"running {name} ...", flush=True)
        section = importlib.import_module(f"bench.{name}").run()
        sections[name] = section.strip() + f"\n\n_{name} took {time.perf_counter() - started:.0f} s "
        sections[name] += f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)._"
    header = (
        "# Benchmark results\n\n"
        f"Written by `make bench` (Python {platform.python_version()}, {os.cpu_count()} CPUs). Each section says "
        "when it ran. Compare ratios, not absolute times: the machines are shared and noisy.\n"
    )
    body = "\n\n".join(f"{MARK.format(name)}\n{sections[name]}" for name in modules if name in sections)
    (HERE / "RESULTS.md").write_text(header + "\n" + body + "\n")
    print(f"wrote {HERE / 'RESULTS.md'}")

if __name__ == "__main__":
    main(sys.argv[1:])
