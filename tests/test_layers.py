"""Imports run one way, and modules stay small enough to read.

The sandbox (a Kubernetes API emulator, `sandbox/`) is a distribution of its own below everything: it imports nothing
of the portal, and the portal imports it only where the demo is wired (its nodes for the demo's placement). The
layers of the portal, from the ground up: the portal's infrastructure (gateway, reconcile engine and its row
contract, naming, HTTP/API base, the desired-state registry), then the apps in the order they build on each other,
the composition layer, which reconciles what every app contributes, and on top the project's wiring (`config`:
settings, URL conf, Celery and WSGI entry points), which names every app by nature. An import from a lower layer to
a higher one fails here, wherever it is written (a function-local import included), and so does any cycle between
apps."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["portal", "tenants", "backends", "quotas", "jobs", "billing", "workspaces", "composition", "config"]
NOT_APPS = {"tests", "bench", "client", "deploy", "tools", "sandbox"}
# The sandbox distribution (its tests included) stands alone: neither the portal's packages nor its suite or Django.
SANDBOX = "sandbox"
NOT_FOR_THE_SANDBOX = {"tests", "django", "rest_framework", "celery"}
# The one place the portal names the sandbox: the demo's wiring, which starts the sandbox's nodes.
SANDBOX_WIRING = {"composition/demo/placement.py"}
MAX_LINES = 450
# Modules still over the limit, each with the size it may not grow beyond until it is split.
KNOWN_LONG: dict[str, int] = {}
# Everything that differs between schedulers is a backend's (`backends/`). Elsewhere a scheduler may be named only
# where a row is declared: the Cluster field's default and the demo's two clusters.
SCHEDULER_NAMED = {"tenants/models.py", "composition/management/commands/seed_demo.py"}
SCHEDULER_NAMES = {"kueue", "volcano"}
# The composition layer composes: what it reconciles it learns from the registry (portal.desired), so beside the
# rows it reconciles it imports no app's internals. Demo seeding, which drives every app's services, aside.
COMPOSITION_MAY_IMPORT = {"tenants.models", "tenants.selectors"}
# The demo's wiring and seeding, in one place (composition/demo/ and its commands), drive every app's services.
DEMO = "composition/demo/"
DEMO_SEEDING = {f"composition/management/commands/seed_{name}.py" for name in ("demo", "jobs", "usage")}
KUEUE_API_VERSION = re.compile(r"kueue\.x-k8s\.io/v\d")  # its one spelling is portal/upstream.py's


def packages(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()
                  if (p / "__init__.py").is_file() and p.name not in NOT_APPS and not p.name.startswith("."))


def modules(root: Path, app: str):
    for path in sorted((root / app).rglob("*.py")):
        parts = path.relative_to(root).parts
        if "migrations" in parts or "__pycache__" in parts:
            continue
        yield path


def imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def imported_apps(source: str, apps: set[str]) -> set[str]:
    """Every app an import names, at module level or inside a function, class or conditional."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names} & apps
    return found


def import_graph(root: Path, apps: list[str]) -> dict[str, dict[str, set[str]]]:
    """app → imported app → the files that import it."""
    graph: dict[str, dict[str, set[str]]] = {app: {} for app in apps}
    for app in apps:
        for path in modules(root, app):
            name = path.relative_to(root).as_posix()
            for other in imported_apps(path.read_text(), set(apps)) - {app}:
                graph[app].setdefault(other, set()).add(name)
    return graph


def upward_imports(graph, layers: list[str]) -> list[str]:
    rank = {app: i for i, app in enumerate(layers)}
    return [f"{app} imports {other} (higher): {', '.join(sorted(files))}"
            for app, targets in graph.items() for other, files in sorted(targets.items())
            if rank[other] > rank[app]]


def cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one app (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def sandbox_imports_of_the_portal(root: Path, apps: list[str]) -> list[str]:
    """Imports in the sandbox distribution (its tests included) of the portal's packages, its suite or Django."""
    banned = set(apps) | NOT_FOR_THE_SANDBOX
    return [f"{path.relative_to(root).as_posix()}: {module}" for path in modules(root, SANDBOX)
            for module in sorted(imported_modules(path.read_text())) if module.split(".")[0] in banned]


def portal_imports_of_the_sandbox(root: Path, apps: list[str]) -> list[str]:
    """The portal's modules that import the sandbox, past the demo's wiring (a function-local import included)."""
    return [name for app in apps for path in modules(root, app)
            if (name := path.relative_to(root).as_posix()) not in SANDBOX_WIRING
            and SANDBOX in imported_apps(path.read_text(), {SANDBOX})]


def _names_a_scheduler(node: ast.AST) -> bool:
    """`x.scheduler`, `scheduler`, `Scheduler.KUEUE` or a scheduler's name as a string."""
    return (isinstance(node, ast.Attribute) and (node.attr == "scheduler" or isinstance(node.value, ast.Name)
                                                 and node.value.id == "Scheduler")
            or isinstance(node, ast.Name) and node.id == "scheduler"
            or isinstance(node, ast.Constant) and node.value in SCHEDULER_NAMES)


def scheduler_comparisons(root: Path, apps: list[str]) -> list[str]:
    """Lines outside `backends/` that compare schedulers, or name one where no row is declared."""
    found = []
    for app in apps:
        if app == "backends":
            continue
        for path in modules(root, app):
            name = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                compared = isinstance(node, ast.Compare) and any(
                    _names_a_scheduler(side) for side in [node.left, *node.comparators])
                named = (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                         and node.value.id == "Scheduler" and node.attr != "choices" and name not in SCHEDULER_NAMED)
                if compared or named:
                    found.append(f"{name}:{node.lineno}")
    return sorted(set(found))


TEMPLATE_SCHEDULER_TEST = re.compile(r"\{%[^%]*(?:scheduler\s*[!=]=|[!=]=\s*[\"'](?:kueue|volcano)[\"'])[^%]*%\}")


def template_scheduler_tests(root: Path) -> list[str]:
    """Template lines that branch on a scheduler's name: a page asks the cluster's backend what it has instead."""
    return [f"{path.relative_to(root).as_posix()}:{n}" for path in sorted((root / "templates").rglob("*.html"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if TEMPLATE_SCHEDULER_TEST.search(line)]


def kueue_api_spellings(root: Path, apps: list[str]) -> list[str]:
    return [path.relative_to(root).as_posix() for app in apps for path in modules(root, app)
            if KUEUE_API_VERSION.search(path.read_text())]


def composition_internals(root: Path, apps: list[str]) -> list[str]:
    """Modules of other apps that composition imports, past the rows it reconciles (demo seeding aside)."""
    found = []
    for path in modules(root, "composition"):
        name = path.relative_to(root).as_posix()
        if name in DEMO_SEEDING or name.startswith(DEMO):
            continue
        found += [f"{name}: {module}" for module in sorted(imported_modules(path.read_text()))
                  if module.split(".")[0] in set(apps) - {"composition", "portal"}
                  and module not in COMPOSITION_MAY_IMPORT]
    return found


def shared_model_bases(models, apps: list[str]) -> dict[str, set[str]]:
    """Abstract model bases our own packages define → the apps whose models derive from each (Django's own aside)."""
    found: dict[str, set[str]] = {}
    for model in models:
        for base in model.__mro__[1:]:
            meta = getattr(base, "_meta", None)
            if meta is not None and meta.abstract and base.__module__.split(".")[0] in apps:
                found.setdefault(f"{base.__module__}.{base.__qualname__}", set()).add(model._meta.app_label)
    return found


def misplaced_row_contracts(models, apps: list[str]) -> list[str]:
    """A row contract more than one app derives from belongs on the ground floor (portal), beside its engine."""
    return sorted(base for base, users in shared_model_bases(models, apps).items()
                  if len(users) > 1 and not base.startswith("portal."))


def long_modules(root: Path, apps: list[str], known: dict[str, int]) -> list[str]:
    too_long = []
    for app in apps:
        for path in modules(root, app):
            name = path.relative_to(root).as_posix()
            lines = path.read_text().count("\n")
            if lines > known.get(name, MAX_LINES):
                too_long.append(f"{name} ({lines} lines)")
    return too_long


def test_every_app_has_a_layer():
    assert set(packages(ROOT)) == set(LAYERS), "place a new top-level package in LAYERS (and in docs/development.md)"


def test_imports_run_from_higher_layers_to_lower_ones_only():
    assert upward_imports(import_graph(ROOT, LAYERS), LAYERS) == []


def test_no_import_cycle_between_apps():
    assert cycles(import_graph(ROOT, LAYERS)) == []


def test_no_module_outside_backends_compares_schedulers():
    assert scheduler_comparisons(ROOT, LAYERS) == []


def test_no_template_branches_on_a_schedulers_name():
    assert template_scheduler_tests(ROOT) == []


def test_the_sandbox_imports_nothing_of_the_portal():
    assert sandbox_imports_of_the_portal(ROOT, LAYERS) == []


def test_the_portal_imports_the_sandbox_only_in_the_demo_wiring():
    assert portal_imports_of_the_sandbox(ROOT, LAYERS) == []
    assert all((ROOT / name).is_file() for name in SANDBOX_WIRING), "remove a moved module from SANDBOX_WIRING"


def test_the_portal_starts_without_the_sandbox(tmp_path):
    # The image leaves the sandbox out (.dockerignore, and its dependencies are not in requirements.lock): every
    # app, the URL conf and the system checks load with `import sandbox` failing.
    script = ("import sys; sys.modules['sandbox'] = None\n"
              "import django; django.setup()\n"
              "from django.core.management import call_command; call_command('check')\n"
              "import config.urls, config.celery\n"
              "from billing import sources\n"
              "assert sources._plugged, 'the demo wiring plugged in no usage source'\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_composition_imports_no_app_internals():
    assert composition_internals(ROOT, LAYERS) == []


def test_the_kueue_api_version_is_spelled_once():
    assert kueue_api_spellings(ROOT, LAYERS) == ["portal/upstream.py"]


def test_modules_stay_short():
    assert long_modules(ROOT, LAYERS, KNOWN_LONG) == []


def test_known_long_modules_still_exist_and_are_long():
    # An entry left behind after its module was split would silently allow the next one to grow.
    for name in KNOWN_LONG:
        path = ROOT / name
        assert path.is_file() and path.read_text().count("\n") > MAX_LINES, f"remove {name} from KNOWN_LONG"


def test_the_reconcile_row_contract_lives_beside_its_engine():
    from django.apps import apps

    assert {"tenants", "jobs", "workspaces"} <= shared_model_bases(apps.get_models(), LAYERS)[
        "portal.reconciled.Reconciled"]
    assert misplaced_row_contracts(apps.get_models(), LAYERS) == []


def test_the_layers_appear_in_this_order_in_the_development_docs():
    page = (ROOT / "docs" / "development.md").read_text()
    line = next((line for line in page.splitlines() if line.startswith("Layers, from the ground up:")), None)
    assert line is not None, "docs/development.md states the layer order"
    assert [name.strip("` .") for name in line.split(":", 1)[1].split(" < ")] == LAYERS


# --- the checks themselves catch what they are for ---------------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path

    return write


def test_a_function_local_import_upward_is_caught(project):
    root = project({"low/__init__.py": "", "high/__init__.py": "",
                    "low/views.py": "def f():\n    from high.models import Thing\n    return Thing\n",
                    "high/models.py": "import low.views\n"})
    graph = import_graph(root, ["low", "high"])
    assert upward_imports(graph, ["low", "high"]) == ["low imports high (higher): low/views.py"]
    assert cycles(graph) == [["high", "low"]]


def test_imports_downward_and_within_an_app_pass(project):
    root = project({"low/__init__.py": "from . import views\n", "low/views.py": "import json\n",
                    "high/__init__.py": "", "high/services.py": "from low import views\nfrom .x import y\n"})
    graph = import_graph(root, ["low", "high"])
    assert upward_imports(graph, ["low", "high"]) == [] and cycles(graph) == []


def test_a_long_module_is_caught(project):
    root = project({"app/__init__.py": "", "app/big.py": "x = 1\n" * (MAX_LINES + 1), "app/ok.py": "x = 1\n"})
    assert long_modules(root, ["app"], {}) == [f"app/big.py ({MAX_LINES + 1} lines)"]
    assert long_modules(root, ["app"], {"app/big.py": MAX_LINES + 1}) == []


def test_a_scheduler_comparison_outside_backends_is_caught(project):
    root = project({"jobs/__init__.py": "", "backends/__init__.py": "",
                    "jobs/sync.py": "def f(job, scheduler):\n    a = job.cluster.scheduler == 'kueue'\n"
                                    "    b = scheduler != Scheduler.VOLCANO\n    c = Scheduler.KUEUE\n",
                    "jobs/ok.py": "def f(job):\n    return job.kind == 'ray' and backend_for(job.cluster).name\n",
                    "backends/kueue.py": "def f(cluster):\n    return cluster.scheduler == 'kueue'\n"})
    assert scheduler_comparisons(root, ["backends", "jobs"]) == ["jobs/sync.py:2", "jobs/sync.py:3", "jobs/sync.py:4"]


def test_a_template_branching_on_a_scheduler_is_caught(project):
    root = project({"templates/a.html": '{% if cluster.scheduler == "kueue" %}x{% endif %}\n'
                                        "{% if backend.cohort_tree %}y{% endif %}\n"
                                        "{% if c.kind != 'volcano' %}z{% endif %}\n"})
    assert template_scheduler_tests(root) == ["templates/a.html:1", "templates/a.html:3"]


def test_a_second_spelling_of_the_kueue_api_version_is_caught(project):
    root = project({"portal/__init__.py": "", "portal/upstream.py": "KUEUE_API = 'kueue.x-k8s.io/v1beta2'\n",
                    "jobs/__init__.py": "", "jobs/sync.py": "LABEL = 'kueue.x-k8s.io/queue-name'\n",
                    "jobs/watch.py": "KIND = ('kueue.x-k8s.io/v1beta2', 'Workload')\n"})
    assert kueue_api_spellings(root, ["portal", "jobs"]) == ["portal/upstream.py", "jobs/watch.py"]


def test_composition_importing_an_app_internal_is_caught(project):
    root = project({"composition/__init__.py": "", "composition/reconcile.py": (
        "from portal import desired\nfrom tenants.models import Cluster\nfrom quotas.usage import record_usage\n"
        "def f():\n    from backends.kueue import flavors_to_remake\n")})
    assert composition_internals(root, ["portal", "tenants", "backends", "quotas", "composition"]) == [
        "composition/reconcile.py: backends.kueue", "composition/reconcile.py: quotas.usage"]


def test_a_row_contract_shared_from_an_app_is_caught():
    def model(module, name, app, *bases, abstract=False):
        cls = type(name, bases, {"__module__": module})
        cls._meta = type("Meta", (), {"abstract": abstract, "app_label": app})
        return cls

    contract = model("tenants.reconciled", "Reconciled", "tenants", abstract=True)
    rows = [model("tenants.models", "Cluster", "tenants", contract), model("jobs.models", "Job", "jobs", contract)]
    assert misplaced_row_contracts(rows, ["tenants", "jobs"]) == ["tenants.reconciled.Reconciled"]
    assert misplaced_row_contracts(rows[:1], ["tenants", "jobs"]) == []


def test_the_sandbox_importing_the_portal_is_caught(project):
    root = project({"sandbox/__init__.py": "", "sandbox/cluster.py": "import json\nfrom jobs.models import Job\n",
                    "sandbox/tests/test_x.py": "def f():\n    from tests.requires import unavailable\n",
                    "sandbox/simulator/ok.py": "from ..store import Store\nimport yaml\n"})
    assert sandbox_imports_of_the_portal(root, ["jobs"]) == [
        "sandbox/cluster.py: jobs.models", "sandbox/tests/test_x.py: tests.requires"]


def test_the_portal_importing_the_sandbox_is_caught(project):
    root = project({"billing/__init__.py": "", "billing/sources.py": "def f():\n    from sandbox import Sandbox\n",
                    "composition/__init__.py": "", "composition/demo/placement.py": "from sandbox.nodes import x\n",
                    "composition/ok.py": "from billing import sources\n"})
    assert portal_imports_of_the_sandbox(root, ["billing", "composition"]) == ["billing/sources.py"]
