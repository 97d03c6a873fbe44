// Small behaviours the pages share, kept out of the HTML so the Content-Security-Policy can refuse inline scripts
// and style attributes: a bar's width comes from its data-width (percent), set through the CSS object model.
(function () {
  "use strict";
  function widths(root) {
    root.querySelectorAll("[data-width]").forEach(function (element) {
      var percent = Math.max(0, Math.min(100, parseFloat(element.dataset.width) || 0));
      element.style.width = percent + "%";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { widths(document); });
  document.addEventListener("htmx:afterSwap", function (event) { widths(event.target); });
})();
