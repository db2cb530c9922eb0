/* beeweb parallel coordinates: draw each .parcoords-chart from the JSON its data-figure names.
   The parcoords trace is in a bundle of its own (static/vendor/plotly-parcoords.min.js, plotly's
   strict build: the WebGL code precompiled, since the CSP forbids compiling it with Function()).
   It is fetched only when such a chart comes near the window, and kept under its own name: the
   page's own Plotly (plotly-beeweb.min.js) stays window.Plotly. */
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

  function plot(el) {
    bundle(el.dataset.bundle).then(function (P) {
      var holder = document.getElementById(el.dataset.figure);
      if (!holder || el.dataset.drawn === "1") return;
      var figure = JSON.parse(holder.textContent);
      P.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false})
        .then(function () { el.dataset.drawn = "1"; });
    }, function (error) {
      el.textContent = String(error);
    });
  }

  // A chart is drawn (and the bundle fetched) when it comes near the window: below the fold
  // of a comparison page it costs that page's first charts nothing.
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        plot(entry.target);
      }
    });
  }, {rootMargin: "200px"}) : null;

  function draw() {
    document.querySelectorAll(".parcoords-chart[data-figure]").forEach(function (el) {
      if (el.dataset.watched === "1" || el.dataset.drawn === "1") return;
      el.dataset.watched = "1";
      if (observer) observer.observe(el); else plot(el);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
  document.addEventListener("htmx:afterSettle", draw);
})();
