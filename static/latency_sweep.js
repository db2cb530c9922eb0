/* beeweb matrix and comparison pages: IOPS and latency percentiles against iodepth / numjobs,
   one chart per set of alike runs, drawn from the JSON each .latency-sweep-chart names
   (data-figure). */
(function () {
  "use strict";
  function drawAll() {
    if (!window.Plotly) return;
    document.querySelectorAll(".latency-sweep-chart[data-figure]").forEach(function (el) {
      var holder = document.getElementById(el.dataset.figure);
      if (!holder || el.dataset.drawn === "1") return;
      var figure = JSON.parse(holder.textContent);
      window.Plotly.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false})
        .then(function () { el.dataset.drawn = "1"; });
    });
  }
  // The comparison page swaps its body in with htmx: draw what came in.
  document.addEventListener("htmx:afterSettle", drawAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
