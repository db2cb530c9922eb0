/* beeweb pages: behaviour that the Content-Security-Policy keeps out of inline handlers. */
(function () {
  "use strict";
  // <form data-confirm="Question?">: submitted only after the user confirms.
  document.addEventListener("submit", function (e) {
    var form = e.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) e.preventDefault();
  }, true);
})();
