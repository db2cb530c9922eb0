/* beeweb history pages: the metric over time with its change points (#history-figure), a
   click on a point opens its run (customdata: the run's page). */
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("history-figure");
    var el = document.getElementById("history-plot");
    if (!holder || !el || !window.Plotly) return;
    var figure = JSON.parse(holder.textContent);
    Plotly.newPlot(el, figure.data, figure.layout, {responsive: true, displaylogo: false})
      .then(function () {
        el.dataset.drawn = "1";
        el.on("plotly_click", function (event) {
          var url = event.points && event.points[0] && event.points[0].customdata;
          if (url && url.charAt(0) === "/") window.location.href = url;
        });
      });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
