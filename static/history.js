/* beeweb history pages: the metric over time with its change points (#history-figure), a
   click on a point opens its run (customdata: the run's UUID, put in the plot's data-run-url,
   the run page's address with a zero UUID). */
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
          var uuid = event.points && event.points[0] && event.points[0].customdata;
          var url = el.dataset.runUrl;
          if (uuid && url && /^[0-9a-f-]{36}$/.test(uuid)) {
            window.location.href = url.replace("00000000-0000-0000-0000-000000000000", uuid);
          }
        });
      });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
