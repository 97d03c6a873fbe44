"""The recorded part of the corpus: what the portal's own tests send to the sandbox (SANDBOX_RECORD), made into
standalone cases: each write becomes a dry run in the corpus namespace, each read a read there, so no case depends
on the state another test built."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from .cases import NAMESPACE

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "recorded.jsonl"
# The suites that talk to a sandbox the way the portal does: reconcile, quotas, jobs, the deployment's full run.
SUITES = ["tests/composition", "tests/quotas/test_reconcile.py", "tests/jobs/test_simulated.py",
          "tests/jobs/test_claims.py", "tests/portal/test_deployment.py", "tests/tenants"]
PER_SHAPE = 12  # the same request shape (method, resource, content type) at most this often


def record(suites=SUITES) -> int:
    fd, raw = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = {**os.environ, "SANDBOX_RECORD": raw}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *suites], env=env,
                   check=False)
    cases = to_cases(Path(raw).read_text().splitlines())
    os.unlink(raw)
    CORPUS.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in cases))
    return len(cases)


NAMESPACED = re.compile(r"^(/apis?/(?:[^/]+/)?[^/]+)/namespaces/([^/]+)/(.+)$")


def to_cases(lines: list[str]) -> list[dict]:
    seen, shapes, cases = set(), Counter(), []
    for line in lines:
        entry = json.loads(line)
        split = urlsplit(entry["path"])
        path, query = split.path.rstrip("/"), dict(parse_qsl(split.query))
        if query.get("watch") or "/watch/" in path or not path.startswith(("/api/", "/apis/")):
            continue
        match = NAMESPACED.match(path)
        if match:
            path = f"{match[1]}/namespaces/{NAMESPACE}/{match[3]}"
        body = entry["body"]
        if body and entry["method"] != "DELETE":
            try:
                obj = json.loads(body)
            except ValueError:
                continue
            if isinstance(obj, dict) and match and isinstance(obj.get("metadata"), dict):
                obj["metadata"]["namespace"] = NAMESPACE
            body = obj
        elif entry["method"] == "DELETE":
            body = None
        if entry["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            query["dryRun"] = "All"
        elif entry["method"] == "GET" and "/" in path.split("/namespaces/")[-1]:
            pass  # a named read
        query.pop("resourceVersion", None)
        query.pop("timeoutSeconds", None)
        full = path + (f"?{urlencode(sorted(query.items()))}" if query else "")
        key = json.dumps([entry["method"], full, body], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        resource = path.rsplit("/", 2)[-2] if entry["method"] != "POST" else path.rsplit("/", 1)[-1]
        shape = (entry["method"], resource, entry["contentType"])
        if shapes[shape] >= PER_SHAPE:
            continue
        shapes[shape] += 1
        kind = body.get("kind", resource) if isinstance(body, dict) else resource
        cases.append({"source": "recorded", "kind": kind, "rule": f"{entry['method']} {resource}",
                      "setup": [], "request": {"method": entry["method"], "path": full, "body": body,
                                               "contentType": entry["contentType"] or "application/json"}})
    return cases


def load() -> list[dict]:
    if not CORPUS.exists():
        return []
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
