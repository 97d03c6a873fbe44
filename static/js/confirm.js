// The confirmation pattern for destructive actions: a form with data-confirm (the question) and
// data-consequence (what will happen, e.g. "16 GPUs will be released") asks in a modal dialog before it submits.
// It adds confirmed=1 to the post, as templates/confirm.html does for browsers without JavaScript (portal/http.py
// confirmed_write). Delegated from the document, so forms that HTMX swaps in are covered too.
(function () {
  "use strict";
  var dialog = null;
  var pending = null;

  function build() {
    dialog = document.createElement("dialog");
    dialog.className = "confirm";
    dialog.id = "confirm-dialog";
    dialog.setAttribute("aria-labelledby", "confirm-title");
    dialog.innerHTML =
      '<form method="dialog"><h2 id="confirm-title"></h2><p class="consequence" id="confirm-consequence"></p>' +
      '<div class="buttons"><button value="keep" class="button secondary" id="confirm-keep">Keep</button>' +
      '<button value="go" class="button danger" id="confirm-go"></button></div></form>';
    document.body.appendChild(dialog);
    dialog.addEventListener("close", function () {
      var go = dialog.returnValue === "go" && pending;
      var target = pending;
      pending = null;
      if (go) {
        // The server acts on a destructive post only with confirmed=1; without it (no JavaScript) it asks itself.
        if (!target.form.querySelector('input[name="confirmed"]')) {
          var flag = document.createElement("input");
          flag.type = "hidden";
          flag.name = "confirmed";
          flag.value = "1";
          target.form.appendChild(flag);
        }
        target.form.setAttribute("data-confirmed", "1");
        target.form.requestSubmit(target.submitter || undefined);
      }
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-confirm")) { return; }
    if (form.getAttribute("data-confirmed")) { form.removeAttribute("data-confirmed"); return; }
    event.preventDefault();
    if (!dialog) { build(); }
    var submitter = event.submitter || null;
    var ask = (submitter && submitter.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    var consequence = (submitter && submitter.getAttribute("data-consequence")) ||
      form.getAttribute("data-consequence") || "";
    dialog.querySelector("#confirm-title").textContent = ask;
    var text = dialog.querySelector("#confirm-consequence");
    text.textContent = consequence;
    text.hidden = !consequence;
    dialog.querySelector("#confirm-go").textContent = (submitter && submitter.textContent.trim()) || "Confirm";
    pending = { form: form, submitter: submitter };
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector("#confirm-keep").focus();
  }, true);
})();
