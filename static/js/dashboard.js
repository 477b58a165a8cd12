/* Quality dashboard charts, drawn with the vendored Chart.js from the report data that the
   page passes in the data-charts attribute of #quality-report: no inline script, so the
   strict CSP holds. Charts are redrawn whenever htmx swaps in a new report fragment. Clicking a bar
   or point opens the items behind it, like the links in the tables. */
(function () {
  "use strict";

  var ACCENT = "#3a55c7";
  var ACCENT_SOFT = "rgba(58, 85, 199, 0.22)";
  var JUDGE = "#d9822b";
  var ALERT = "#c1352b";
  var MUTED = "#7b8494";

  var drawnFrom = null;
  var charts = [];

  // Canvases carry data-chart, not ids: htmx "settles" the attributes of elements whose
  // id survives a swap, copying the old style attribute across, which the CSP refuses.
  function canvasFor(name) {
    return document.querySelector('canvas[data-chart="' + name + '"]');
  }

  // The data rides in data-charts on the report fragment: htmx drops <script> elements
  // (json_script included) from swapped content, attributes survive.
  function readData() {
    var node = document.querySelector("#quality-report[data-charts]");
    if (!node) return null;
    try {
      return { node: node, data: JSON.parse(node.dataset.charts) };
    } catch (error) {
      return null;
    }
  }

  function percent(value) {
    return value === null || value === undefined ? null : Math.round(value * 1000) / 10;
  }

  function openLink(links) {
    return function (event, elements) {
      if (!elements || !elements.length) return;
      var url = links[elements[0].index];
      if (url) window.location.assign(url);
    };
  }

  function keep(chart) {
    if (chart) charts.push(chart);
  }

  function labelsPerDay(data) {
    var canvas = canvasFor("labels-per-day");
    var series = data.labels_per_day;
    if (!canvas || !series || !series.dates.length) return null;
    return new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: series.dates,
        datasets: [
          { label: data.strings.labels, data: series.labels, backgroundColor: ACCENT, yAxisID: "y" },
          { type: "line", label: data.strings.submissions, data: series.submissions, borderColor: JUDGE,
            backgroundColor: JUDGE, yAxisID: "y1", tension: 0.2 }
        ]
      },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: { y: { beginAtZero: true, position: "left" },
                  y1: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false } } }
      }
    });
  }

  // Agreement per slice: the 95% interval as a floating bar, the estimate as a point.
  function agreementChart(name, series, strings) {
    var canvas = canvasFor(name);
    if (!canvas || !series || !series.names.length) return null;
    var intervals = series.low.map(function (low, i) {
      var high = series.high[i];
      return low === null || high === null ? null : [percent(low), percent(high)];
    });
    return new window.Chart(canvas, {
      data: {
        labels: series.names,
        datasets: [
          { type: "bar", label: strings.ci, data: intervals, backgroundColor: ACCENT_SOFT, borderColor: ACCENT,
            borderWidth: 1, borderSkipped: false, barPercentage: 0.45 },
          { type: "line", label: strings.agreement, data: series.value.map(percent), showLine: false,
            pointRadius: 5, pointHoverRadius: 7, pointBackgroundColor: ACCENT, borderColor: ACCENT }
        ]
      },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        onClick: openLink(series.links),
        scales: { y: { min: 0, max: 100, ticks: { callback: function (v) { return v + "%"; } } } },
        plugins: {
          tooltip: {
            callbacks: {
              afterBody: function (items) {
                var i = items[0].dataIndex;
                return series.n[i] + " " + strings.units;
              }
            }
          }
        }
      }
    });
  }

  function leaderboard(data) {
    var canvas = canvasFor("leaderboard");
    var board = data.leaderboard;
    if (!canvas || !board || !board.models.length) return null;
    var datasets = [{ label: data.strings.human, data: board.human, backgroundColor: ACCENT }];
    if (board.judge.some(function (v) { return v !== null; })) {
      datasets.push({ label: data.strings.judge, data: board.judge, backgroundColor: JUDGE });
    }
    return new window.Chart(canvas, {
      type: "bar",
      data: { labels: board.models, datasets: datasets },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        onClick: openLink(board.links),
        scales: { y: { beginAtZero: true, max: 100 } }
      }
    });
  }

  // One expert's consistency curve: bucket means, the rolling mean, and the baseline.
  function sparkline(canvas, curve, strings) {
    if (!curve || !curve.points.length) return null;
    var baseline = curve.baseline;
    var datasets = [
      { label: strings.peer, data: curve.points.map(percent), borderColor: ACCENT, borderWidth: 1.5,
        pointRadius: curve.alerts.map(function (a) { return a ? 2.5 : 1.2; }),
        pointBackgroundColor: curve.alerts.map(function (a) { return a ? ALERT : ACCENT; }),
        pointBorderWidth: 0, tension: 0.25 },
      { label: strings.rolling, data: curve.rolling.map(percent), borderColor: JUDGE, borderWidth: 1,
        pointRadius: 0, tension: 0.25 }
    ];
    if (baseline !== null && baseline !== undefined) {
      datasets.push({ label: strings.baseline, data: curve.points.map(function () { return percent(baseline); }),
                      borderColor: MUTED, borderWidth: 1, borderDash: [3, 3], pointRadius: 0 });
    }
    return new window.Chart(canvas, {
      type: "line",
      data: { labels: curve.dates, datasets: datasets },
      options: {
        responsive: false, animation: false, events: ["mousemove", "mouseout"],
        scales: { x: { display: false }, y: { display: false, min: 0, max: 100 } },
        plugins: { legend: { display: false }, tooltip: { enabled: true, displayColors: false } }
      }
    });
  }

  function drawAll() {
    if (!window.Chart) return;
    var found = readData();
    if (!found || found.node === drawnFrom) return;
    charts.forEach(function (chart) { chart.destroy(); });
    charts = [];
    drawnFrom = found.node;
    var data = found.data;
    keep(labelsPerDay(data));
    keep(agreementChart("by-dimension", data.by_dimension, data.strings));
    keep(agreementChart("by-model", data.by_model, data.strings));
    keep(leaderboard(data));
    Array.prototype.forEach.call(document.querySelectorAll("canvas.sparkline"), function (canvas) {
      keep(sparkline(canvas, data.curves[canvas.dataset.curve], data.strings));
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawAll();
    // htmx:load fires on the swapped-in content itself; an outerHTML swap detaches the old
    // target, so events fired on it (afterSettle) would never bubble up to the body.
    if (window.htmx) window.htmx.onLoad(drawAll);
  });
})();
