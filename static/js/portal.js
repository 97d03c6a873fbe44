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
  // A button with data-copy="<element id>" copies that element's text and says so.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var text = document.getElementById(button.dataset.copy).textContent.trim();
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {  // plain http (the demo): the older copy command, from a selection
      var range = document.createRange();
      range.selectNodeContents(document.getElementById(button.dataset.copy));
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      if (document.execCommand("copy")) done();
    }
  });
  document.addEventListener("DOMContentLoaded", function () { widths(document); });
  document.addEventListener("htmx:afterSwap", function (event) { widths(event.target); });
})();
