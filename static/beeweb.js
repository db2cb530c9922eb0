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
})();
