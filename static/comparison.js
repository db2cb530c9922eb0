/* beeweb comparisons: draw the plotly charts of #chart-data, PNG/SVG downloads. */
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("chart-data");
    if (!holder || !window.Plotly) return;
    var charts = JSON.parse(holder.textContent);
    var stat = document.body.classList.contains("print");
    charts.forEach(function (c) {
      var el = document.getElementById(c.id);
      if (!el) return;
      Plotly.newPlot(el, c.figure.data, c.figure.layout, {
        responsive: !stat, displaylogo: false, staticPlot: stat,
        toImageButtonOptions: {format: "svg", filename: c.filename}
      });
    });
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-print]")) {
      window.print();
      return;
    }
    var button = e.target.closest("[data-download]");
    if (!button || !window.Plotly) return;
    var el = document.getElementById(button.dataset.chart);
    Plotly.downloadImage(el, {format: button.dataset.download, filename: el.dataset.filename,
      width: el.offsetWidth || 900, height: el.offsetHeight || 460});
  });
  window.addEventListener("load", draw);
  document.addEventListener("htmx:afterSettle", function () {
    // A counter of finished swaps: lets browser tests wait for the builder to settle.
    document.body.dataset.swaps = String((+document.body.dataset.swaps || 0) + 1);
    draw();
  });
  window.beewebDrawCharts = draw;
})();
