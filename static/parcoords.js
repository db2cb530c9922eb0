/* beeweb parallel coordinates: draw each .parcoords-chart from the JSON its data-figure names.
   The parcoords trace needs plotly's strict bundle (the cartesian one lacks the trace, and the
   gl2d one compiles WebGL code with Function(), which the CSP forbids). It is large, so it
   is fetched only when a page holds such a chart, after the page's other charts, and kept
   under its own name: the cartesian Plotly of the compare page stays window.Plotly. */
(function () {
  "use strict";
  var loading = null;

  function bundle(src) {
    if (window.beewebParcoordsPlotly) return Promise.resolve(window.beewebParcoordsPlotly);
    if (loading) return loading;
    loading = new Promise(function (resolve, reject) {
      var previous = window.Plotly;
      var script = document.createElement("script");
      script.src = src;
      script.onload = function () {
        window.beewebParcoordsPlotly = window.Plotly;
        if (previous) window.Plotly = previous;
        resolve(window.beewebParcoordsPlotly);
      };
      script.onerror = function () {
        loading = null;
        reject(new Error("could not load " + src));
      };
      document.head.appendChild(script);
    });
    return loading;
  }

  function draw() {
    var charts = document.querySelectorAll(".parcoords-chart[data-figure]");
    if (!charts.length) return;
    bundle(charts[0].dataset.bundle).then(function (P) {
      charts.forEach(function (el) {
        var holder = document.getElementById(el.dataset.figure);
        if (!holder || el.dataset.drawn === "1") return;
        var figure = JSON.parse(holder.textContent);
        P.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false})
          .then(function () { el.dataset.drawn = "1"; });
      });
    }, function (error) {
      charts.forEach(function (el) { el.textContent = String(error); });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
  document.addEventListener("htmx:afterSettle", draw);
})();
