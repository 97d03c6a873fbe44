"""The figure builders are pure: rows in, traces out (compared whole where it matters)."""

import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal

from billing import charts
from billing.selectors import RollupRow

D1, D2 = date(2026, 11, 1), date(2026, 11, 2)


def test_usage_by_flavor_stacks_allocated_and_draws_used():
    figure = charts.usage_by_flavor_figure([
        {"day": D1, "flavor": "h100", "allocated": Decimal(8), "used": Decimal(2)},
        {"day": D1, "flavor": "a100", "allocated": Decimal(4), "used": Decimal(4)},
        {"day": D2, "flavor": "h100", "allocated": Decimal(8), "used": Decimal(1)},
    ])
    assert [(t.type, t.name, list(t.y)) for t in figure.data] == [
        ("bar", "a100 allocated", [4.0, 0.0]), ("bar", "h100 allocated", [8.0, 8.0]),
        ("scatter", "used (all flavors)", [6.0, 1.0])]
    assert list(figure.data[0].x) == [D1, D2] and figure.layout.barmode == "stack"


def test_cost_vs_budget_is_cumulative_with_budget_and_forecast_lines():
    figure = charts.cost_vs_budget_figure(
        [{"day": D1, "cost": Decimal("10.50")}, {"day": D2, "cost": Decimal("4.50")}],
        start=datetime(2026, 11, 1, tzinfo=UTC), end=datetime(2026, 12, 1, tzinfo=UTC), budget=Decimal(100),
        forecast=Decimal(225), currency="USD")
    cost, budget, forecast = figure.data
    assert list(cost.y) == [10.5, 15.0]
    assert (list(budget.x), list(budget.y)) == ([D1, date(2026, 11, 30)], [100.0, 100.0])
    assert (list(forecast.x), list(forecast.y)) == ([D2, date(2026, 11, 30)], [15.0, 225.0])


def test_cost_vs_budget_without_budget_or_data_has_only_the_cost_trace():
    figure = charts.cost_vs_budget_figure([], start=datetime(2026, 11, 1, tzinfo=UTC),
                                          end=datetime(2026, 12, 1, tzinfo=UTC), budget=None, forecast=Decimal(0),
                                          currency="USD")
    assert [t.name for t in figure.data] == ["cost to date"]


def test_cost_by_group_splits_used_and_idle():
    figure = charts.cost_by_group_figure([RollupRow(key="CC-1", cost=Decimal(10), idle_cost=Decimal(4)),
                                          RollupRow(key="CC-2", cost=Decimal(3), idle_cost=Decimal(0))],
                                         title="Cost by cost centre", currency="USD")
    used, idle = figure.data
    assert (list(used.y), list(used.x), list(idle.x)) == (["CC-2", "CC-1"], [3.0, 6.0], [0.0, 4.0])


def test_cluster_utilisation_in_percent_per_cluster():
    figure = charts.cluster_utilisation_figure([
        {"day": D2, "cluster": "east", "utilisation": 0.5}, {"day": D1, "cluster": "east", "utilisation": 0.25},
        {"day": D1, "cluster": "west", "utilisation": 1.0}])
    assert [(t.name, list(t.x), list(t.y)) for t in figure.data] == [
        ("east", [D1, D2], [25.0, 50.0]), ("west", [D1], [100.0])]


def test_heatmap_is_team_by_day_with_gaps_left_blank():
    figure = charts.utilisation_heatmap([
        {"day": D1, "team": "nlp", "utilisation": 0.123}, {"day": D2, "team": "nlp", "utilisation": 0.9},
        {"day": D2, "team": "cv", "utilisation": 0.0}])
    heatmap = figure.data[0]
    assert list(heatmap.y) == ["cv", "nlp"] and list(heatmap.x) == [D1, D2]
    assert [list(row) for row in heatmap.z] == [[None, 0.0], [12.3, 90.0]]


def test_figure_html_is_a_div_and_a_json_block_without_script_or_fixed_width():
    html = charts.figure_html(charts.utilisation_heatmap([]), div_id="heat")
    assert html.startswith('<div id="heat" class="chart plotly-chart"') and len(html) < 20_000
    assert "Plotly.newPlot" not in html  # no inline script: static/js/charts.js draws it
    block = re.search(r'<script type="application/json" data-chart-for="heat">(.*)</script>', html, re.S).group(1)
    spec = json.loads(block)
    assert spec["config"]["responsive"] is True and spec["layout"]["autosize"] is True
    assert "width" not in spec["layout"]


def test_figure_json_cannot_close_its_script_element():
    figure = charts.cost_by_group_figure([RollupRow(key="</script><b>&", cost=Decimal(1), idle_cost=Decimal(0))],
                                         title="t", currency="USD")
    text = charts.figure_json(figure)
    assert "</script>" not in text and "<" not in text and "&" not in text
    assert json.loads(text)["data"][0]["y"] == ["</script><b>&"]


def test_served_plotly_js_is_the_version_the_figures_are_built_for():
    """The npm bundle (package-lock.json, installed into static/vendor/) and the Python package's plotly.js agree,
    so the figures' JSON is read by the plotly.js it was written for."""
    from django.conf import settings
    from plotly.offline import get_plotlyjs_version

    lock = json.loads((settings.BASE_DIR / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/plotly.js-cartesian-dist-min"]["version"]
    header = (settings.BASE_DIR / "static/vendor/plotly-cartesian.min.js").read_text()[:200]
    assert pinned == get_plotlyjs_version() and f"plotly.js (cartesian - minified) v{pinned}" in header


def test_each_gpu_is_a_line_of_activity_and_of_memory_under_one_legend_entry():
    from datetime import timedelta

    from billing.gpus import Gpu, GpuSeries, JobGpus

    start = datetime(2026, 11, 2, 10, tzinfo=UTC)
    t1, t2 = start + timedelta(minutes=1), start + timedelta(minutes=2)

    def series(node, index, pod, *values):
        return GpuSeries(Gpu(uuid=f"GPU-{node}-{index}-{pod}", index=str(index), node=node, model="H100", pod=pod),
                         utilisation={t1: values[0], t2: values[1]}, memory_gib={t1: 40.0, t2: 41.25})

    # GPU 0 of node-a was held by two pods in turn (a worker replaced under another name): named with its pod.
    found = JobGpus(signal="DCGM_FI_PROF_SM_ACTIVE", step=60, start=start, end=start + timedelta(minutes=2),
                    gpus=[series("node-a", 0, "w-0", 0.5, 0.25), series("node-a", 0, "w-0b", 0.0, 0.0),
                          series("node-b", 3, "w-1", 0.9, 1.0)])
    figure = charts.job_gpus_figure(found)
    assert [(t.name, t.legendgroup, t.showlegend, t.yaxis, list(t.y)) for t in figure.data] == [
        ("node-a GPU 0 (w-0)", "node-a GPU 0 (w-0)", True, "y", [50.0, 25.0]),
        ("node-a GPU 0 (w-0)", "node-a GPU 0 (w-0)", False, "y2", [40.0, 41.2]),
        ("node-a GPU 0 (w-0b)", "node-a GPU 0 (w-0b)", True, "y", [0.0, 0.0]),
        ("node-a GPU 0 (w-0b)", "node-a GPU 0 (w-0b)", False, "y2", [40.0, 41.2]),
        ("node-b GPU 3", "node-b GPU 3", True, "y", [90.0, 100.0]),
        ("node-b GPU 3", "node-b GPU 3", False, "y2", [40.0, 41.2])]
    assert all(t.mode == "lines+markers" for t in figure.data)  # two points: markers show them
    assert figure.layout.showlegend and figure.layout.meta == {"legendMinWidth": charts.LEGEND_MIN_WIDTH}
    assert list(figure.layout.xaxis.range) == [start, start + timedelta(minutes=2)]

    many = JobGpus(signal="", step=60, start=start, end=t2,
                   gpus=[series("node-a", i, "w-0", 0.5, 0.5) for i in range(charts.MAX_LEGEND + 1)])
    assert charts.job_gpus_figure(many).layout.showlegend is False  # the table names them
