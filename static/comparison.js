/* beeweb comparisons: draw the plotly charts of #chart-data, PNG/SVG downloads.
   Downloads (the buttons under a chart and the camera in its mode bar) draw the figure with
   its "export" layout: a title naming what is compared, the filters and the testbeds, so
   that an image stands on its own. */
(function () {
  "use strict";
  var figures = {};  // chart id -> {figure, filename}, untouched by Plotly

  function copy(value) {
    return JSON.parse(JSON.stringify(value));
  }

  // null in an error bar array means "no error bar" (n = 1): Plotly would draw a 0-length
  // bar with caps for null, and draws nothing for NaN (which JSON cannot carry).
  function withoutEmptyErrors(figure) {
    (figure.data || []).forEach(function (trace) {
      var error = trace.error_y;
      if (!error) return;
      ["array", "arrayminus"].forEach(function (key) {
        if (error[key]) {
          error[key] = error[key].map(function (v) { return v === null ? NaN : v; });
        }
      });
    });
    return figure;
  }

  function exportFigure(id) {
    var entry = figures[id];
    var figure = withoutEmptyErrors(copy(entry.figure));
    var layout = figure.layout || {};
    var extra = figure["export"] || {};
    Object.keys(extra).forEach(function (key) { layout[key] = extra[key]; });
    var height = (layout.height || 440) + ((extra.margin || {}).t || 0) -
      ((entry.figure.layout.margin || {}).t || 0);
    layout.height = height;
    return {data: figure.data, layout: layout, height: height};
  }

  function download(id, format) {
    var el = document.getElementById(id);
    var fig = exportFigure(id);
    Plotly.downloadImage({data: fig.data, layout: fig.layout}, {
      format: format, filename: figures[id].filename,
      width: Math.max(el.offsetWidth || 0, 900), height: fig.height
    });
  }

  function draw() {
    var holder = document.getElementById("chart-data");
    if (!holder || !window.Plotly) return;
    var charts = JSON.parse(holder.textContent);
    var stat = document.body.classList.contains("print");
    charts.forEach(function (c) {
      var el = document.getElementById(c.id);
      if (!el) return;
      figures[c.id] = {figure: copy(c.figure), filename: c.filename};
      withoutEmptyErrors(c.figure);
      Plotly.newPlot(el, c.figure.data, c.figure.layout, {
        responsive: !stat, displaylogo: false, staticPlot: stat,
        toImageButtonOptions: {format: "svg", filename: c.filename},
        modeBarButtonsToRemove: ["toImage"],
        modeBarButtonsToAdd: [{
          name: "download-svg",
          title: "Download as SVG (with title, filters and testbeds)",
          icon: Plotly.Icons.camera,
          click: function () { download(c.id, "svg"); }
        }]
      });
    });
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-print]")) {
      window.print();
      return;
    }
    var button = e.target.closest("[data-download]");
    if (!button || !window.Plotly || !figures[button.dataset.chart]) return;
    download(button.dataset.chart, button.dataset.download);
  });
  // Deferred scripts (plotly.js, this one) have all run by DOMContentLoaded; waiting for
  // "load" as well cost ~100 ms before the first chart.
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
  document.addEventListener("htmx:afterSettle", function () {
    // A counter of finished swaps: lets browser tests wait for the builder to settle.
    document.body.dataset.swaps = String((+document.body.dataset.swaps || 0) + 1);
    draw();
  });
  // Choosing the attribute of a new filter ("Add filter on") is half a step: only its values
  // change the comparison. Its request replaces the current history entry instead of adding
  // one, so that Back undoes the whole filter in one press.
  document.addEventListener("htmx:beforeHistoryUpdate", function (e) {
    var config = e.detail.requestConfig || {};
    var trigger = config.triggeringEvent;
    if (trigger && trigger.target && trigger.target.id === "fk" && e.detail.history) {
      e.detail.history.type = "replace";
    }
  });
  window.beewebDrawCharts = draw;
  window.beewebExportFigure = exportFigure;
})();
