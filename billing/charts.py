"""Pure Plotly figure builders: selector output in, a figure out. They never query and never read Prometheus.

Pages embed `figure_html(...)`: an empty <div> and the figure as a JSON data block that static/js/charts.js draws,
sized by its card (no inline script, so the Content-Security-Policy needs no exception). plotly.js itself is served
from static files, so charts work offline.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import plotly.graph_objects as go
import plotly.io as pio
from django.utils.html import format_html
from django.utils.safestring import mark_safe

# No width: the chart takes its card's width (autosize) and follows it on resize (responsive).
LAYOUT = {"margin": {"l": 50, "r": 20, "t": 40, "b": 40}, "height": 320, "autosize": True,
          "template": "plotly_white", "legend": {"orientation": "h", "y": -0.2}}
# No mode bar: plotly.js styles each one with an inline <style> element, which the Content-Security-Policy refuses.
CONFIG = {"displaylogo": False, "displayModeBar": False, "responsive": True}
# The same escapes as Django's json_script: the JSON cannot close its <script> element or open a comment.
_JSON_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


def _f(value) -> float:
    return float(value or 0)


def figure_json(figure: go.Figure) -> str:
    """The figure and its config as JSON (data, layout, config), for static/js/charts.js."""
    spec = {**figure.to_plotly_json(), "config": CONFIG}
    return pio.to_json(spec, validate=False).translate(_JSON_ESCAPES)


def figure_html(figure: go.Figure, *, div_id: str) -> str:
    """The chart's <div> and its figure as a JSON data block, without plotly.js (the page loads it once)."""
    return format_html('<div id="{}" class="chart plotly-chart" role="img" aria-label="{}"></div>'
                       '<script type="application/json" data-chart-for="{}">{}</script>',
                       div_id, _title(figure), div_id, mark_safe(figure_json(figure)))  # escaped for <script>


def _title(figure: go.Figure) -> str:
    title = figure.layout.title.text
    return f"Chart: {title}" if title else "Chart"


def usage_by_flavor_figure(rows: list[dict]) -> go.Figure:
    """Allocated GPU-hours per day, stacked by flavor, and the used GPU-hours of all flavors as a line."""
    days = sorted({r["day"] for r in rows})
    allocated: dict[str, dict[date, float]] = defaultdict(dict)
    used: dict[date, float] = defaultdict(float)
    for r in rows:
        allocated[r["flavor"]][r["day"]] = _f(r["allocated"])
        used[r["day"]] += _f(r["used"])
    figure = go.Figure()
    for flavor in sorted(allocated):
        figure.add_bar(name=f"{flavor} allocated", x=days, y=[allocated[flavor].get(d, 0.0) for d in days])
    figure.add_scatter(name="used (all flavors)", x=days, y=[used[d] for d in days], mode="lines+markers")
    figure.update_layout(**LAYOUT, barmode="stack", title="GPU-hours per day", yaxis_title="GPU-hours")
    return figure


def cost_vs_budget_figure(rows: list[dict], *, start: datetime, end: datetime, budget: Decimal | None,
                          forecast: Decimal | None, currency: str) -> go.Figure:
    """Cumulative cost through the month, the budget as a line, and the forecast from today to the month's end."""
    days, totals, running = [], [], Decimal(0)
    for r in rows:
        running += r["cost"]
        days.append(r["day"])
        totals.append(float(running))
    first, last = start.date(), (end - timedelta(days=1)).date()
    figure = go.Figure()
    figure.add_scatter(name="cost to date", x=days, y=totals, mode="lines+markers", fill="tozeroy")
    if budget is not None:
        figure.add_scatter(name="budget", x=[first, last], y=[float(budget)] * 2, mode="lines",
                           line={"dash": "dot", "color": "#b42318"})
    if forecast is not None and days:
        figure.add_scatter(name="forecast", x=[days[-1], last], y=[totals[-1], float(forecast)], mode="lines",
                           line={"dash": "dash"})
    figure.update_layout(**LAYOUT, title=f"Cost this month ({currency})", yaxis_title=currency,
                         xaxis={"range": [first, last]})
    return figure


def cost_by_group_figure(rows: list, *, title: str, currency: str) -> go.Figure:
    """Horizontal bars per team / cost centre / department: the used part and the idle part of the cost."""
    rows = sorted(rows, key=lambda r: r.cost)
    keys = [r.key for r in rows]
    figure = go.Figure()
    figure.add_bar(name="used", y=keys, x=[float(r.cost - r.idle_cost) for r in rows], orientation="h")
    figure.add_bar(name="idle", y=keys, x=[float(r.idle_cost) for r in rows], orientation="h")
    figure.update_layout(**{**LAYOUT, "height": max(240, 28 * len(rows) + 120)}, barmode="stack", title=title,
                         xaxis_title=currency)
    return figure


def cluster_utilisation_figure(rows: list[dict]) -> go.Figure:
    """Used ÷ allocated GPU-hours per cluster and day."""
    series: dict[str, list[tuple[date, float]]] = defaultdict(list)
    for r in rows:
        series[r["cluster"]].append((r["day"], r["utilisation"] * 100))
    figure = go.Figure()
    for cluster in sorted(series):
        points = sorted(series[cluster])
        figure.add_scatter(name=cluster, x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers")
    figure.update_layout(**LAYOUT, title="Cluster utilisation (used ÷ allocated GPU-hours)", yaxis_title="%",
                         yaxis_range=[0, 100])
    return figure


def utilisation_heatmap(cells: list[dict]) -> go.Figure:
    """Team × day, coloured by utilisation (%); a day without usage is left blank."""
    teams = sorted({c["team"] for c in cells})
    days = sorted({c["day"] for c in cells})
    value = {(c["team"], c["day"]): round(c["utilisation"] * 100, 1) for c in cells}
    z = [[value.get((team, day)) for day in days] for team in teams]
    figure = go.Figure(go.Heatmap(x=days, y=teams, z=z, zmin=0, zmax=100, colorscale="RdYlGn",
                                  colorbar={"title": "%"}, hoverongaps=False))
    figure.update_layout(**{**LAYOUT, "height": max(240, 26 * len(teams) + 120)},
                         title="Utilisation by team and day")
    figure.update_xaxes(dtick=86400000, tickformat="%b %-d")  # one tick a day, dates without hours
    return figure


def evidence_figure(*, hours: list, guaranteed: list, allocated: list, borrowed: list, quota_waiting: list,
                    flavor: str) -> go.Figure:
    """A team's units of one flavor hour by hour: held (the part beyond its guarantee shaded as borrowed), its
    guarantee as a step line, and the units its jobs waited for quota."""
    figure = go.Figure()
    figure.add_scatter(name="held", x=hours, y=[_f(a) for a in allocated], mode="lines", fill="tozeroy",
                       line={"width": 1})
    figure.add_scatter(name="borrowed", x=hours, y=[_f(b) for b in borrowed], mode="lines", fill="tozeroy",
                       line={"width": 1, "color": "#b54708"})
    figure.add_scatter(name="guaranteed", x=hours, y=guaranteed, mode="lines", line={"shape": "hv", "dash": "dot"})
    figure.add_scatter(name="waiting for quota", x=hours, y=[_f(w) for w in quota_waiting], mode="lines",
                       line={"width": 1, "color": "#b42318"})
    figure.update_layout(**{**LAYOUT, "height": 260}, title=f"{flavor} units per hour, last 30 days",
                         yaxis_title="units")
    return figure


def fair_sharing_figure(*, series_now: dict[str, list[tuple[float, float]]],
                        series: dict[str, list[tuple[float, float]]], names: dict[str, str]) -> go.Figure:
    """Each team's decayed usage ÷ weight hour by hour, as a replay gives it: with the weights and half-life tried
    (solid) and with today's (dotted, same colour). Lower is served first."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
               "#17becf"]
    figure = go.Figure()
    for index, slug in enumerate(sorted(series)):
        colour = palette[index % len(palette)]
        for points, suffix, dash in ((series[slug], "", "solid"), (series_now.get(slug, []), " today", "dot")):
            figure.add_scatter(name=f"{names.get(slug, slug)}{suffix}", mode="lines",
                               x=[datetime.fromtimestamp(t, tz=UTC) for t, _ in points], y=[v for _, v in points],
                               line={"color": colour, "dash": dash, "width": 2 if not suffix else 1})
    figure.update_layout(**LAYOUT, title="Usage ÷ weight by hour", yaxis_title="decayed GPU units ÷ weight")
    return figure


def job_activity_figure(rows: list[dict]) -> go.Figure:
    """A job's GPUs hour by hour, as selectors.job_activity gives them: utilisation on the hour's signal, SM and
    tensor-pipe activity where exported (gaps where not), in %, and the memory held per GPU on its own axis."""
    hours = [r["hour"] for r in rows]

    def percent(key):
        return [None if r[key] is None else round(r[key] * 100, 1) for r in rows]

    figure = go.Figure()
    figure.add_scatter(name="utilisation", x=hours, y=percent("utilisation"), mode="lines+markers")
    figure.add_scatter(name="SM activity", x=hours, y=percent("sm_active"), mode="lines+markers",
                       line={"dash": "dot"})
    figure.add_scatter(name="tensor pipe", x=hours, y=percent("tensor_active"), mode="lines+markers",
                       line={"dash": "dash"})
    figure.add_scatter(name="memory per GPU (GiB)", x=hours, y=[round(r["memory_gib"], 1) for r in rows],
                       mode="lines", yaxis="y2", line={"color": "#7f7f7f", "width": 1}, fill="tozeroy",
                       fillcolor="rgba(127,127,127,0.12)")
    figure.update_layout(**{**LAYOUT, "height": 280}, title="GPU activity and memory per hour",
                         yaxis={"title": "%", "range": [0, 105]},
                         yaxis2={"title": "GiB", "overlaying": "y", "side": "right", "rangemode": "tozero",
                                 "showgrid": False})
    return figure


MAX_LEGEND = 16  # GPUs; a bigger job's lines are named on hover (and in the table) rather than in a legend
LEGEND_MIN_WIDTH = 600  # px of the chart's card: narrower (a phone), the table names the lines, not a legend
FEW_POINTS = 30  # a line of fewer points shows them as markers too (a job that ran minutes: one or two points)


def job_gpus_figure(found) -> go.Figure:
    """A job's GPUs one by one (gpus.JobGpus): activity in % above, framebuffer memory in GiB below, a line per GPU
    in both over the whole range read, one legend entry per GPU (its pod too where two pods held it) that shows or
    hides both of its lines."""
    names = Counter(series.gpu.name for series in found.gpus)
    last = [max(series.utilisation) for series in found.gpus if series.utilisation]  # a step ends after `end`
    figure = go.Figure()
    for series in found.gpus:
        name = series.gpu.name if names[series.gpu.name] == 1 else f"{series.gpu.name} ({series.gpu.pod})"
        for values, axis, unit, show in ((series.utilisation, "y", "%", True), (series.memory_gib, "y2", "GiB", False)):
            times = sorted(values)
            figure.add_scatter(name=name, legendgroup=name, showlegend=show, x=times, xaxis="x",
                               y=[round(values[t] * (100 if axis == "y" else 1), 1) for t in times], yaxis=axis,
                               mode="lines" if len(times) > FEW_POINTS else "lines+markers",
                               hovertemplate=f"%{{y}} {unit}<extra>%{{fullData.name}}</extra>")
    figure.update_layout(**{**LAYOUT, "height": 420}, title="Each GPU's activity and memory",
                         xaxis={"anchor": "y2", "range": [found.start, max([found.end, *last])]},
                         yaxis={"title": "activity %", "range": [0, 105], "domain": [0.55, 1]},
                         yaxis2={"title": "memory GiB", "rangemode": "tozero", "domain": [0, 0.42]},
                         hovermode="x unified", showlegend=len(found.gpus) <= MAX_LEGEND,
                         meta={"legendMinWidth": LEGEND_MIN_WIDTH})
    return figure
