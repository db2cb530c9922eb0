/* beeweb run page: the telemetry panels (x axes matched, so zooming one zooms all) and the
   latency percentiles, drawn from the page's JSON (#telemetry-figure, #latency-figure). */
(function () {
  "use strict";
  function draw(dataId, plotId) {
    var holder = document.getElementById(dataId);
    var el = document.getElementById(plotId);
    if (!holder || !el || !window.Plotly) return;
    var figure = JSON.parse(holder.textContent);
    // Traces name their time array ("x": key of figure.xs): one array per node, shared.
    (figure.data || []).forEach(function (trace) {
      if (typeof trace.x === "string" && figure.xs) trace.x = figure.xs[trace.x];
    });
    Plotly.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false})
      .then(function () { el.dataset.drawn = "1"; });
  }
  function drawAll() {
    draw("telemetry-figure", "telemetry-plot");
    draw("latency-figure", "latency-plot");
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
