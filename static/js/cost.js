// The submit form's cost estimate, kept current as the flavor, size and runtime limit change; the same sentence
// jobs/cost.py writes on the server (which the page shows before this runs, and without script).
(function () {
  "use strict";
  function amount(value) {
    if (value >= 100) return Math.round(value).toLocaleString("en-US");
    return value.toFixed(2);
  }
  function number(form, name) {
    var field = form.elements[name];
    var value = field ? parseInt(field.value, 10) : NaN;
    return isNaN(value) ? null : value;
  }
  document.addEventListener("DOMContentLoaded", function () {
    var data = document.getElementById("unit-prices");
    var out = document.getElementById("cost-estimate");
    if (!data || !out) return;
    var prices = JSON.parse(data.textContent);
    var form = out.closest("form");
    function update() {
      var price = prices[form.elements.flavor ? form.elements.flavor.value : ""];
      var units = (number(form, "workers") || 0) * (number(form, "gpus_per_worker") || 0);
      if (!price || units <= 0) { out.textContent = ""; return; }
      var hourly = parseFloat(price[0]) * units, currency = price[1];
      var text = "About " + amount(hourly) + " " + currency + " per hour at today's rates";
      var minutes = number(form, "max_runtime_minutes");
      if (minutes) text += ", " + amount(hourly * minutes / 60) + " " + currency + " at its runtime limit";
      out.textContent = text + ".";
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
  });
})();
