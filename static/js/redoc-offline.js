// Loaded before Redoc: the docs stay offline. Redoc's sidebar shows a logo from its vendor's CDN; an image whose
// address is on another host is hidden instead of fetched (the Content-Security-Policy would refuse it anyway).
(function () {
  "use strict";
  var setAttribute = Element.prototype.setAttribute;
  function outside(value) {
    try {
      var url = new URL(value, window.location.href);
      return url.protocol !== "data:" && url.origin !== window.location.origin;
    } catch (e) {
      return true;
    }
  }
  Element.prototype.setAttribute = function (name, value) {
    if (this instanceof HTMLImageElement && String(name).toLowerCase() === "src" && outside(value)) {
      return setAttribute.call(this, "hidden", "");
    }
    return setAttribute.call(this, name, value);
  };
  var src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
  Object.defineProperty(HTMLImageElement.prototype, "src", {
    configurable: true,
    get: function () { return src.get.call(this); },
    set: function (value) { if (outside(value)) { this.hidden = true; } else { src.set.call(this, value); } },
  });
})();
