// Draws every chart on the page from its JSON data block (billing/charts.py figure_html), sized by its card:
// Plotly's responsive config follows the window, and a ResizeObserver follows the card itself (a grid reflow,
// a sidebar) so a chart is never wider than the box it sits in. A figure whose layout.meta.legendMinWidth is set
// hides its legend in a narrower box (a phone), where a legend of many entries would crowd out the plot.
(function () {
  "use strict";

  function legendFits(target, layout) {
    var min = layout.meta && layout.meta.legendMinWidth;
    return !min || target.clientWidth >= min;
  }

  function draw(block) {
    var target = document.getElementById(block.getAttribute("data-chart-for"));
    if (!target || target.getAttribute("data-drawn")) { return; }
    var spec = JSON.parse(block.textContent);
    var layout = spec.layout || {};
    delete layout.width;
    layout.autosize = true;
    var legend = layout.showlegend !== false;
    layout.showlegend = legend && legendFits(target, layout);
    target.setAttribute("data-drawn", "1");
    window.Plotly.newPlot(target, spec.data || [], layout, spec.config || { responsive: true });
    if (window.ResizeObserver) {
      var last = target.clientWidth;
      new ResizeObserver(function () {
        if (target.clientWidth !== last) {
          last = target.clientWidth;
          var show = legend && legendFits(target, layout);
          if (show !== target.layout.showlegend) {
            window.Plotly.relayout(target, { showlegend: show });
          }
          window.Plotly.Plots.resize(target);
        }
      }).observe(target);
    }
  }

  function drawAll(root) {
    if (!window.Plotly) { return; }
    (root || document).querySelectorAll("script[data-chart-for]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { drawAll(); });
  } else {
    drawAll();
  }
  document.addEventListener("htmx:afterSettle", function (event) { drawAll(event.target); });
})();
