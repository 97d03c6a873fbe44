// Draws every chart a page carries as data (billing/charts.py figure_html) with plotly.js, loaded before this file.
// Kept out of the pages so the Content-Security-Policy can refuse inline scripts.
(function () {
  "use strict";
  function draw() {
    document.querySelectorAll(".plotly-chart[data-figure]").forEach(function (element) {
      var figure = JSON.parse(element.dataset.figure);
      var config = JSON.parse(element.dataset.config || "{}");
      window.Plotly.newPlot(element, figure.data, figure.layout, config);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
