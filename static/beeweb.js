/* beeweb pages: behaviour that the Content-Security-Policy keeps out of inline handlers. */
(function () {
  "use strict";
  // <form data-confirm="Question?"> or <button data-confirm="Question?">: submitted only
  // after the user confirms (the button's question wins: one form, several actions).
  document.addEventListener("submit", function (e) {
    var button = e.submitter && e.submitter.closest("[data-confirm]");
    var form = e.target.closest("form[data-confirm]");
    var question = (button || form || {dataset: {}}).dataset.confirm;
    if (question && !window.confirm(question)) e.preventDefault();
  }, true);
  // <input data-local>: a control of its own (the comparison's matrix search box) inside a
  // form that reloads on "change": its changes stay with it.
  document.addEventListener("change", function (e) {
    if (e.target.closest && e.target.closest("[data-local]")) e.stopPropagation();
  }, true);
  // <pre class="tail">: a running tool's last lines, replaced by each poll. It shows its
  // newest lines (the bottom), unless the reader scrolled up in it before the poll: then it
  // keeps their place. Keyed by the box's position among the page's tail boxes.
  var tails = {};
  function tailKey(pre) {
    var section = pre.closest("[id]");
    var all = Array.prototype.slice.call(document.querySelectorAll("pre.tail"));
    return (section ? section.id : "") + ":" + all.indexOf(pre);
  }
  function remember() {
    document.querySelectorAll("pre.tail").forEach(function (pre) {
      var fromBottom = pre.scrollHeight - pre.clientHeight - pre.scrollTop;
      tails[tailKey(pre)] = fromBottom > 4 ? pre.scrollTop : null;
    });
  }
  function follow() {
    document.querySelectorAll("pre.tail").forEach(function (pre) {
      var kept = tails[tailKey(pre)];
      pre.scrollTop = (kept === undefined || kept === null) ? pre.scrollHeight : kept;
    });
  }
  document.addEventListener("DOMContentLoaded", follow);
  document.addEventListener("htmx:beforeSwap", remember);
  document.addEventListener("htmx:afterSettle", follow);
})();
