/* The report page: builds everything from the JSON in #report-data (static report) or from
   the /api endpoints (autoresearch serve). Data from the log is untrusted: the DOM is built with
   createElement and textContent only, and canvas text is drawn with fillText. */
(function () {
  'use strict';
  var root = document.documentElement;
  var errors = [];
  function recordError(message) {
    errors.push(String(message).slice(0, 500));
    root.setAttribute('data-errors', JSON.stringify(errors));
  }
  window.addEventListener('error', function (e) { recordError((e.message || 'error') + ' @' + (e.lineno || '?')); });
  window.addEventListener('unhandledrejection', function (e) {
    recordError('unhandled rejection: ' + (e.reason && e.reason.message || e.reason));
  });
  document.addEventListener('securitypolicyviolation', function (e) {
    recordError('blocked by the content security policy: ' + e.violatedDirective);
  });
  var consoleError = console.error;
  console.error = function () {
    recordError(Array.prototype.map.call(arguments, String).join(' '));
    consoleError.apply(console, arguments);
  };

  var COLORS = { keep: '#2ca02c', discard: '#9a9a9a', crash: '#d62728', compare: '#1f77b4', current: '#ff7f0e' };
  var FAILED = { crash: 1, timeout: 1, checks_failed: 1, tampered: 1 };
  var CURVES = [
    ['loss', 'training loss'], ['lr_mult', 'learning-rate multiplier'], ['grad_norm', 'gradient norm'],
    ['tok_per_s', 'tokens per second'], ['mfu', 'MFU (%)'], ['mem_mb', 'memory (MiB)'], ['power_w', 'GPU power (W)']
  ];
  var boot = JSON.parse(document.getElementById('report-data').textContent);
  var state = {
    model: null, details: boot.details || {}, selected: null, compare: null, version: null,
    progress: null, detailCharts: [], currentCharts: {}, currentRun: null,
    sort: { key: 'run', dir: 1 }, charts: 0
  };

  // ------------------------------------------------------------ small helpers
  function h(tag, cls, text) {
    var el = document.createElement(tag);
    if (cls) el.className = cls;
    if (text !== undefined && text !== null) el.textContent = String(text);
    return el;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      parent.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return parent;
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function fmt(v) {
    if (!isNum(v)) return '';
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
    return String(Number(v.toPrecision(7)));
  }
  // A run against the best then, in words: "1.20% worse" (one sign convention: the word says which way).
  function deltaText(v) {
    if (!isNum(v)) return '';
    if (v === 0) return 'equal to the best';
    return Math.abs(v).toFixed(2) + '% ' + (better(v, 0) ? 'better' : 'worse');
  }
  function duration(s) {
    if (!isNum(s)) return '';
    if (s < 60) return s.toFixed(1) + ' s';
    var m = Math.floor(s / 60), sec = Math.round(s % 60);
    if (m < 60) return m + 'm ' + (sec < 10 ? '0' : '') + sec + 's';
    return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
  }
  function when(ms) { return isNum(ms) ? new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : ''; }
  function asText(v) { return typeof v === 'string' ? v : JSON.stringify(v); }
  function asiText(asi) {
    if (asi === null || asi === undefined || asi === '') return '';
    if (typeof asi !== 'object' || Array.isArray(asi)) return asText(asi);
    return Object.keys(asi).map(function (k) { return k + '=' + asText(asi[k]); }).join('; ');
  }
  // The diagnosis in the table: its codes (the family when it named none); the detail pane has the rest.
  function diagText(d) {
    if (!d || typeof d !== 'object') return '';
    if (Array.isArray(d.codes) && d.codes.length) return d.codes.map(asText).join(', ');
    return d.family ? asText(d.family) : '';
  }
  function better(a, b) { return state.model.direction === 'higher' ? a > b : a < b; }
  function runByNumber(n) {
    var runs = state.model.runs;
    for (var i = 0; i < runs.length; i++) if (runs[i].run === n) return runs[i];
    return null;
  }
  function badge(status) { return h('span', 'badge ' + status, status); }
  function loaded(r) { return !r.partial; }

  // serve pages the runs: the chart's columns carry every run, m.runs the full rows of some
  // (m.runIndex: where each sits). Every run becomes an entry; the ones whose row has not come
  // yet are marked partial (the chart draws them, the table shows loaded rows only). Rows
  // loaded before are kept (a recorded run does not change).
  function unpack(m) {
    if (!m.chart) return m;
    var c = m.chart, n = c.run.length, runs = new Array(n), old = state.model ? state.model.runs : [];
    for (var i = 0; i < n; i++) {
      var o = old[i];
      if (o && !o.partial && o.run === c.run[i] && o.status === c.status[i] && o.metric === c.metric[i] &&
          o.running_best === c.running_best[i] && o.segment === c.segment[i]) { runs[i] = o; continue; }
      runs[i] = { run: c.run[i], status: c.status[i], metric: c.metric[i], segment: c.segment[i],
        running_best: c.running_best[i], delta_pct: c.delta_pct[i], description: c.description[i] || '', partial: true };
    }
    m.runIndex.forEach(function (at, k) { if (at >= 0 && at < n) runs[at] = m.runs[k]; });
    m.runs = runs;
    delete m.chart;
    return m;
  }

  function mergeRow(row) {   // a full row from api/run/N or api/runs, into its partial entry
    var runs = state.model.runs;
    for (var i = 0; i < runs.length; i++) {
      if (runs[i].run === row.run && runs[i].partial && runs[i].status === row.status) { runs[i] = row; return true; }
    }
    return false;
  }

  function loadMore() {
    var runs = state.model.runs, at = -1;
    for (var i = 0; i < runs.length; i++) if (runs[i].partial) { at = i; break; }
    if (at < 0) return Promise.resolve();
    var button = document.getElementById('more-runs');
    button.disabled = true;
    return fetch('api/runs?offset=' + at + '&limit=' + (state.model.pageRows || 500), { cache: 'no-store' })
      .then(function (res) { return res.json(); })
      .then(function (got) {
        var runs = state.model.runs;
        (got.runs || []).forEach(function (row, k) {
          var i = got.offset + k;
          if (runs[i] && runs[i].partial && runs[i].run === row.run && runs[i].status === row.status) runs[i] = row;
        });
        button.disabled = false;
        renderTable(state.model);
      });
  }
  function chartWidth(el) { return Math.max(320, (el.clientWidth || 900) - 14); }

  // ------------------------------------------------------------ header, warnings, summary
  function renderHeader(m) {
    document.getElementById('title').textContent = m.title;
    document.title = 'autoresearch report: ' + m.title;
    var unit = m.metricUnit ? ' (' + m.metricUnit + ')' : '';
    document.getElementById('subtitle').textContent = 'metric ' + m.metricName + unit + ', ' + m.direction +
      ' is better · ' + m.runs.length + ' runs · generated ' + when(m.generated);
    var w = document.getElementById('warnings');
    w.hidden = !m.warningCount;
    if (m.warningCount) {
      w.textContent = m.warningCount + ' log line(s) skipped as malformed:\n' + m.warnings.join('\n');
    }
  }

  function card(k, v, s, cls, key) {
    var c = h('div', 'card' + (cls ? ' ' + cls : ''));
    if (key) c.setAttribute('data-key', key);
    return add(c, h('div', 'k', k), h('div', 'v', v), s ? h('div', 's', s) : null);
  }

  // The header shows the current segment's summary: the very object `autoresearch status
  // --json` prints (m.status), so baseline, best, change, counts and streaks read the same.
  function renderSummary(m) {
    var box = clear(document.getElementById('summary'));
    var s = m.summary, st = m.status, seg = m.segments.length ? m.segments[m.segments.length - 1] : null;
    if (!m.runs.length) { add(box, h('div', 'empty', 'No runs logged yet.')); return; }
    var base = st ? st.baseline : null, best = st ? st.best : null, change = st ? st.change : null;
    if (base && best) {
      add(box, card('baseline → best' + (m.segments.length > 1 ? ' (segment ' + st.segment + ')' : ''),
        fmt(base.metric) + ' → ' + fmt(best.metric),
        change.text + ' · baseline run #' + base.run + ' · best run #' + best.run,
        change.word === 'better' ? 'good' : change.word === 'worse' ? 'bad' : null, 'baseline-best'));
    }
    var c = st ? st.counts : s.counts, n = st ? st.runs : s.runs;
    var failed = (c.crash || 0) + (c.timeout || 0) + (c.checks_failed || 0) + (c.tampered || 0);
    function rate(k) { return n ? ((c[k] || 0) / n * 100).toFixed(0) + '%' : '–'; }
    add(box,
      card('runs', String(n), (m.segments.length > 1 ? 'in segment ' + (st ? st.segment : seg.index) + ', ' : '') +
        (c.keep || 0) + ' kept' + (m.segments.length > 1 ? ' · ' + s.runs + ' in all' : ''), null, 'runs'),
      card('keep / discard / failed', rate('keep') + ' / ' + rate('discard') + ' / ' + (n ? (failed / n * 100).toFixed(0) + '%' : '–'),
        (c.keep || 0) + ' kept, ' + (c.discard || 0) + ' discarded, ' + failed + ' crashed, timed out or failed checks',
        null, 'counts'),
      card('runs per hour', isNum(s.runsPerHour) ? s.runsPerHour.toFixed(1) : '–',
        isNum(s.runsPerHour) ? 'over ' + s.spanHours.toFixed(1) + ' h'
          : isNum(s.spanHours) ? 'runs span ' + duration(s.spanHours * 3600) + ': too short for a rate' : ''),
      card('GPU hours', isNum(s.gpuHours) ? s.gpuHours.toFixed(2) : '–',
        s.runsWithDuration + ' of ' + s.runs + ' runs timed'),
      s.earlyAborts ? card('saved by early abort', isNum(s.earlyAbortSavedHours) ? duration(s.earlyAbortSavedHours * 3600) : '–',
        s.earlyAborts + (s.earlyAborts === 1 ? ' run' : ' runs') + ' stopped behind the best', null, 'early-abort') : null,
      card('longest streak without a keep', s.longestNoKeep + (s.longestNoKeep === 1 ? ' run' : ' runs'),
        'current streak ' + s.currentNoKeep, null, 'streaks')
    );
    if (isNum(s.energyKwh)) {
      add(box, card('energy', s.energyKwh.toFixed(2) + ' kWh',
        'about ' + (s.energyKwh * m.kwhPrice).toFixed(2) + ' at ' + m.kwhPrice + ' per kWh · ' + s.runsWithEnergy + ' runs measured'));
    }
    var segBox = document.getElementById('segments-box');
    segBox.hidden = m.segments.length < 2;
    if (m.segments.length > 1) {
      var t = clear(document.getElementById('segments'));
      var hr = add(h('tr'), h('th', null, 'segment'), h('th', null, 'name'), h('th', null, 'metric'),
        h('th', null, 'runs'), h('th', null, 'kept'), h('th', null, 'baseline'), h('th', null, 'best'), h('th', null, 'gain'));
      add(t, hr);
      m.segments.forEach(function (g) {
        add(t, add(h('tr'), h('td', 'num', g.index), h('td', null, g.name), h('td', null, g.metricName + ' (' + g.direction + ')'),
          h('td', 'num', g.runs), h('td', 'num', g.kept), h('td', 'num', fmt(g.baseline)), h('td', 'num', fmt(g.best)),
          h('td', 'num', g.change ? g.change.text : '')));
      });
    }
  }

  // ------------------------------------------------------------ the progress chart
  // Every run is drawn: a point in range; a triangle with its value at the top or bottom edge
  // when it is off the scale; a cross in its status's colour along the bottom when it has no
  // value (crash, timeout). Failed runs are never green. What was drawn is published on <html>
  // as data-progress-marks (run, status, mark), so a test can check that no run is missing.
  var STATUS_STYLE = {
    keep: { label: 'kept', color: COLORS.keep, size: 9 },
    discard: { label: 'discarded', color: COLORS.discard, size: 7 },
    crash: { label: 'crash', color: COLORS.crash, size: 8 },
    timeout: { label: 'timeout', color: '#9467bd', size: 8 },
    checks_failed: { label: 'checks failed', color: '#e377c2', size: 8 }
  };
  var OTHER_STYLE = { color: '#8c564b', size: 8 };
  function styleOf(status) {
    return STATUS_STYLE[status] || { label: status, color: OTHER_STYLE.color, size: OTHER_STYLE.size };
  }

  function progressStatuses(runs) {
    var seen = {}, order = ['discard', 'keep', 'crash', 'timeout', 'checks_failed'];
    runs.forEach(function (r) { seen[r.status] = (seen[r.status] || 0) + 1; });
    Object.keys(seen).sort().forEach(function (s) { if (order.indexOf(s) < 0) order.push(s); });
    return order.filter(function (s) { return seen[s]; }).map(function (s) { return [s, seen[s]]; });
  }

  function renderProgress(m) {
    var el = document.getElementById('progress');
    if (state.progress) { state.progress.destroy(); state.progress = null; }
    clear(el);
    if (!m.runs.length) { add(el, h('div', 'empty', 'The chart appears after the first run.')); return; }
    var runs = m.runs, xs = [], yr = m.yRange && isNum(m.yRange[0]) ? m.yRange : null;
    var statuses = progressStatuses(runs);
    var columns = statuses.map(function () { return []; });
    var segBest = m.segments.map(function () { return []; });
    function inRange(v) { return isNum(v) && (!yr || (v >= yr[0] && v <= yr[1])); }
    runs.forEach(function (r, i) {
      xs.push(i + 1);
      statuses.forEach(function (st, k) { columns[k].push(r.status === st[0] && inRange(r.metric) ? r.metric : null); });
      segBest.forEach(function (arr, k) { arr.push(r.segment === k && inRange(r.running_best) ? r.running_best : null); });
    });
    var series = [{ label: 'run' }], data = [xs];
    statuses.forEach(function (st, k) {
      var style = styleOf(st[0]);
      series.push(pointSeries(style.label + ' (' + st[1] + ')', style.color, style.size, st[0]));
      data.push(columns[k]);
    });
    segBest.forEach(function (arr, k) {
      series.push({
        label: m.segments.length > 1 ? 'best, segment ' + k : 'running best', stroke: COLORS.keep, width: 2,
        paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, spanGaps: false,
        value: function (u, v, si, i) {
          var at = i === null || i === undefined ? lastIn(runs, k) : i;
          return at === null || runs[at].segment !== k ? '' : fmt(runs[at].running_best);
        }
      });
      data.push(arr);
    });
    var downAt = null;
    var opts = {
      width: chartWidth(el), height: 400, series: series,
      scales: { x: { time: false, range: function (u, lo, hi) { return [Math.min(lo, 1) - 0.5, hi + 0.5]; } },
        y: { range: function (u, lo, hi) { return yr ? [yr[0], yr[1]] : [lo, hi]; } } },
      axes: [{ label: 'experiment', incrs: [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000] },
        { label: m.metricName + (m.metricUnit ? ' (' + m.metricUnit + ')' : ''), size: 70,
          values: function (u, vals) { return vals.map(fmt); } }],
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false } },
      hooks: {
        draw: [function (u) {
          var marks = drawOverlay(u, m, yr), points = 0;
          for (var k = 1; k <= statuses.length; k++) u.data[k].forEach(function (v) { if (v !== null) points++; });
          root.setAttribute('data-progress-marks', JSON.stringify(marks));
          root.setAttribute('data-progress-points', String(points));   // the in-range points uPlot drew
          root.setAttribute('data-progress-drawn', String(marks.length));
        }],
        setCursor: [function (u) { showHover(u.cursor.idx); }],
        ready: [function (u) {
          u.over.addEventListener('mousedown', function (e) { downAt = e.clientX; });
          u.over.addEventListener('click', function (e) {
            if (downAt !== null && Math.abs(e.clientX - downAt) > 3) return;
            var i = u.cursor.idx;
            if (i !== null && i !== undefined) select(runs[i].run, true);
          });
        }]
      }
    };
    state.progress = new uPlot(opts, data, el);
    state.charts++;
  }

  // ------------------------------------------------------------ waves (runs of a pool)
  // One row per wave, and a chart of the control's value and the idle GPU share per wave.
  // The hidden holdout: only in a page written for the person (`autoresearch report` in a
  // terminal, or --holdout); never in serve's model.
  function renderHoldout(m) {
    var hd = m.holdout;
    var box = document.getElementById('holdout-box');
    box.hidden = !hd;
    if (!hd) return;
    var warn = document.getElementById('holdout-warning');
    warn.hidden = !hd.warning;
    warn.textContent = hd.warning ? 'Warning: ' + hd.warning : '';
    var t = clear(document.getElementById('holdout'));
    add(t, add(h('tr'), h('th', null, 'run'), h('th', null, 'commit'), h('th', null, m.metricName || 'validation'),
      h('th', null, 'holdout'), h('th', null, 'description')));
    (hd.rows || []).forEach(function (r) {
      add(t, add(h('tr'), h('td', 'num', '#' + r.run), h('td', null, r.commit || ''), h('td', 'num', fmt(r.validation)),
        h('td', 'num', isNum(r.holdout) ? fmt(r.holdout) : '–'), h('td', null, r.description || '')));
    });
    document.getElementById('holdout-note').textContent = isNum(hd.validation_gain)
      ? 'kept chain: validation gained ' + fmt(hd.validation_gain) + ' (threshold ' + fmt(hd.validation_threshold) +
        '), holdout gained ' + (isNum(hd.holdout_gain) ? fmt(hd.holdout_gain) : '–') + ' (threshold ' +
        fmt(hd.holdout_threshold) + ')'
      : 'needs two kept runs to compare';
  }

  function renderWaves(m) {
    var waves = m.waves || [];
    var box = document.getElementById('waves-box');
    box.hidden = !waves.length;
    if (!waves.length) return;
    var t = clear(document.getElementById('waves'));
    add(t, add(h('tr'), h('th', null, 'wave'), h('th', null, 'runs'), h('th', null, 'candidates'), h('th', null, 'kept'),
      h('th', null, 'runners-up'), h('th', null, 'control'), h('th', null, 'GPUs'), h('th', null, 'wall'),
      h('th', null, 'GPU idle')));
    waves.forEach(function (w) {
      add(t, add(h('tr'), h('td', 'num', w.wave), h('td', null, (w.runs || []).join(', ')),
        h('td', 'num', (w.candidates || []).length), h('td', 'num', w.kept === null ? '–' : '#' + w.kept),
        h('td', null, (w.runners_up || []).map(function (n) { return '#' + n; }).join(', ')),
        h('td', 'num', fmt(w.control_metric)), h('td', 'num', isNum(w.gpus) ? w.gpus : ''),
        h('td', 'num', isNum(w.wall_s) ? duration(w.wall_s) : ''),
        h('td', 'num', isNum(w.idle_fraction) ? (w.idle_fraction * 100).toFixed(0) + '% (' + duration(w.idle_s) + ')' : '')));
    });
    var el = clear(document.getElementById('waves-chart'));
    if (state.wavesChart) { state.wavesChart.destroy(); state.wavesChart = null; }
    var xs = waves.map(function (w) { return w.wave; });
    var control = waves.map(function (w) { return isNum(w.control_metric) ? w.control_metric : null; });
    var idle = waves.map(function (w) { return isNum(w.idle_fraction) ? w.idle_fraction * 100 : null; });
    state.wavesChart = new uPlot({
      width: chartWidth(el), height: 220,
      series: [{ label: 'wave' },
        { label: 'control ' + m.metricName, stroke: COLORS.keep, width: 2, scale: 'y', value: function (u, v) { return fmt(v); } },
        { label: 'GPU idle %', stroke: '#9467bd', width: 1, dash: [4, 4], scale: '%', value: function (u, v) { return isNum(v) ? v.toFixed(0) + '%' : ''; } }],
      scales: { x: { time: false }, '%': { range: [0, 100] } },
      axes: [{ label: 'wave', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, { scale: 'y', label: 'control', size: 70, values: function (u, vals) { return vals.map(fmt); } },
        { scale: '%', side: 1, label: 'GPU idle %', grid: { show: false } }]
    }, [xs, control, idle], el);
    state.charts++;
  }

  // A status's points; the legend shows the hovered run's value under its own status only.
  function pointSeries(label, color, size, status) {
    return { label: label, stroke: color, fill: color, paths: function () { return null; },
      points: { show: true, size: size, width: 1, stroke: status === 'discard' ? '#6b6b6b' : color, fill: color },
      value: function (u, v, si, i) {
        var runs = state.model.runs, r = i === null || i === undefined ? lastOf(runs, status) : runs[i];
        if (!r || r.status !== status) return '';
        if (!isNum(r.metric)) return 'no value';
        return (i === null || i === undefined ? 'last ' : '') + fmt(r.metric);
      } };
  }

  function lastIn(runs, segment) {
    for (var j = runs.length - 1; j >= 0; j--) if (runs[j].segment === segment) return j;
    return null;
  }

  function lastOf(runs, status) {   // the legend's value while the cursor is off the chart
    for (var j = runs.length - 1; j >= 0; j--) if (runs[j].status === status) return runs[j];
    return null;
  }

  function drawOverlay(u, m, yr) {
    var ctx = u.ctx, dpr = uPlot.pxRatio, runs = m.runs, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height;
    var left = u.bbox.left, right = u.bbox.left + u.bbox.width, marks = [];
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top - 2 * dpr, u.bbox.width, u.bbox.height + 4 * dpr);
    ctx.clip();
    // segment boundaries: a new config header starts a new baseline
    ctx.strokeStyle = '#888'; ctx.setLineDash([5 * dpr, 4 * dpr]); ctx.lineWidth = dpr;
    for (var i = 1; i < runs.length; i++) {
      if (runs[i].segment !== runs[i - 1].segment) {
        var sx = u.valToPos(i + 0.5, 'x', true);
        ctx.beginPath(); ctx.moveTo(sx, top); ctx.lineTo(sx, bottom); ctx.stroke();
        ctx.fillStyle = '#666'; ctx.font = (11 * dpr) + 'px sans-serif'; ctx.textAlign = 'left';
        ctx.fillText('segment ' + runs[i].segment, sx + 4 * dpr, top + 12 * dpr);
      }
    }
    ctx.setLineDash([]);
    ctx.font = (10 * dpr) + 'px sans-serif'; ctx.textBaseline = 'middle';
    var labelEnd = [-Infinity, -Infinity], xMin = u.scales.x.min, xMax = u.scales.x.max;   // top, bottom
    runs.forEach(function (r, i) {
      var style = styleOf(r.status), visible = i + 1 >= xMin && i + 1 <= xMax;
      var x = u.valToPos(i + 1, 'x', true), d = 4 * dpr, mark;
      if (!isNum(r.metric)) {
        mark = 'no value';   // a cross along the bottom edge, in the status's colour
        if (visible) {
          var y = bottom - 7 * dpr;
          ctx.strokeStyle = style.color; ctx.lineWidth = 2 * dpr;
          ctx.beginPath(); ctx.moveTo(x - d, y - d); ctx.lineTo(x + d, y + d); ctx.moveTo(x + d, y - d); ctx.lineTo(x - d, y + d); ctx.stroke();
        }
      } else if (yr && (r.metric > yr[1] || r.metric < yr[0])) {
        var up = r.metric > yr[1];
        mark = up ? 'above' : 'below';   // a triangle on the edge, pointing off the chart, with the value
        if (visible) {
          var ey = up ? top + 5 * dpr : bottom - 5 * dpr, s = up ? -1 : 1;
          ctx.fillStyle = style.color; ctx.strokeStyle = '#333'; ctx.lineWidth = dpr;
          ctx.beginPath(); ctx.moveTo(x, ey + s * 5 * dpr); ctx.lineTo(x - 5 * dpr, ey - s * 4 * dpr); ctx.lineTo(x + 5 * dpr, ey - s * 4 * dpr);
          ctx.closePath(); ctx.fill(); ctx.stroke();
          var text = (up ? '↑ ' : '↓ ') + fmt(r.metric), w = ctx.measureText(text).width;
          var atRight = x > right - 80 * dpr, from = atRight ? x - 8 * dpr - w : x + 8 * dpr;
          if (from > labelEnd[up ? 0 : 1]) {   // the value, unless it would overwrite the previous one
            labelEnd[up ? 0 : 1] = from + w + 4 * dpr;
            ctx.fillStyle = '#333'; ctx.textAlign = 'left';
            ctx.fillText(text, from, ey);
          }
        }
      } else {
        mark = 'point';   // drawn by uPlot, in its status's series
      }
      marks.push([r.run, r.status, mark]);
    });
    // kept runs are labelled with their description (the largest gains when there are many)
    var kept = [];
    runs.forEach(function (r, i) { if (r.status === 'keep' && isNum(r.metric)) kept.push([i, r]); });
    if (kept.length > 40) {
      kept = kept.slice().sort(function (a, b) { return Math.abs(b[1].delta_pct || 0) - Math.abs(a[1].delta_pct || 0); }).slice(0, 40);
    }
    ctx.fillStyle = '#1a6e1a'; ctx.font = (10 * dpr) + 'px sans-serif';
    ctx.textAlign = 'left'; ctx.textBaseline = 'alphabetic';   // uPlot leaves its axis alignment set
    kept.forEach(function (p) {
      var x = u.valToPos(p[0] + 1, 'x', true), y = u.valToPos(p[1].metric, 'y', true);
      if (x < left || x > right || y < top || y > bottom) return;
      var text = p[1].description.length > 38 ? p[1].description.slice(0, 37) + '…' : p[1].description;
      ctx.save(); ctx.translate(x + 5 * dpr, y - 5 * dpr); ctx.rotate(-Math.PI / 7); ctx.fillText(text, 0, 0); ctx.restore();
    });
    ctx.restore();
    return marks;
  }

  function showHover(i) {
    var el = document.getElementById('hover');
    if (i === null || i === undefined || !state.model.runs[i]) { el.textContent = ''; return; }
    var r = state.model.runs[i];
    el.textContent = '#' + r.run + ' · ' + r.status + (isNum(r.metric) ? ' · ' + fmt(r.metric) : '') +
      (isNum(r.delta_pct) ? ' (' + deltaText(r.delta_pct) + ')' : '') + ' · ' + r.description;
  }

  // ------------------------------------------------------------ the runs table
  // Every cell's text comes from the report (views/report.py: table_cells), as the page's static
  // table shows it; the script adds behaviour (sorting on the raw values, filtering, the status
  // badge, better/worse colours), never its own formatting of a cell.
  function cellText(key) { return function (r) { return r.cells ? r.cells[key] : ''; }; }
  var COLUMNS = [
    { key: 'run', num: true, get: function (r) { return r.run; } },
    { key: 'status', get: function (r) { return r.status; }, cell: function (r) { return badge(cellText('status')(r)); } },
    { key: 'metric', num: true, get: function (r) { return r.metric; } },
    { key: 'delta', num: true, get: function (r) { return r.delta_pct; },
      cell: function (r) {
        var td = h('span', null, cellText('delta')(r));
        // never green (or red) for a failed run: its value was not a result
        if (isNum(r.delta_pct) && r.delta_pct !== 0 && !FAILED[r.status]) td.className = better(r.delta_pct, 0) ? 'better' : 'worse';
        return td;
      } },
    { key: 'confidence', num: true, get: function (r) { return r.confidence; } },
    { key: 'description', cls: 'desc', get: function (r) { return r.description; } },
    { key: 'asi', cls: 'asi', get: function (r) { return asiText(r.asi); } },
    { key: 'diagnosis', cls: 'diag-cell', get: function (r) { return diagText(r.diagnosis); } },
    { key: 'duration', num: true, get: function (r) { return r.duration_s; } },
    { key: 'commit', get: function (r) { return r.commit; } }
  ];

  function renderTable(m) {
    var table = clear(document.getElementById('runs'));
    var head = h('tr');
    var labels = {};
    (m.tableColumns || []).forEach(function (c) { labels[c[0]] = c[1]; });
    COLUMNS.forEach(function (col) {
      var th = h('th', null, labels[col.key] || col.key);
      th.setAttribute('data-key', col.key);
      th.addEventListener('click', function () {
        state.sort = { key: col.key, dir: state.sort.key === col.key ? -state.sort.dir : 1 };
        sortRows();
      });
      head.appendChild(th);
    });
    add(table, add(h('thead'), head));
    var body = h('tbody');
    state.rows = m.runs.filter(loaded).map(function (r) {
      var tr = h('tr');
      tr.setAttribute('data-run', String(r.run));
      COLUMNS.forEach(function (col) {
        var td = h('td', (col.num ? 'num' : '') + (col.cls ? ' ' + col.cls : ''));
        if (col.cell) td.appendChild(col.cell(r));
        else td.textContent = cellText(col.key)(r);
        if (col.key === 'asi' || col.key === 'description') td.title = col.get(r);
        if (col.key === 'diagnosis' && r.diagnosis && r.diagnosis.explanation) td.title = asText(r.diagnosis.explanation);
        tr.appendChild(td);
      });
      tr.addEventListener('click', function () { select(r.run, false); });
      body.appendChild(tr);
      return { run: r, tr: tr, haystack: [r.description, asiText(r.asi), r.reason, r.status, r.commit, diagText(r.diagnosis),
        '#' + r.run].join(' ').toLowerCase() };
    });
    table.appendChild(body);
    state.tbody = body;
    var sel = document.getElementById('status-filter'), keepValue = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    Object.keys(m.summary.counts).sort().forEach(function (s) {
      var o = h('option', null, s + ' (' + m.summary.counts[s] + ')'); o.value = s; sel.appendChild(o);
    });
    sel.value = keepValue;
    sortRows();
  }

  function sortRows() {
    var col = COLUMNS.filter(function (c) { return c.key === state.sort.key; })[0], dir = state.sort.dir;
    state.rows.sort(function (a, b) {
      var x = col.get(a.run), y = col.get(b.run);
      var xn = x === null || x === undefined || x === '', yn = y === null || y === undefined || y === '';
      if (xn || yn) return xn && yn ? a.run.run - b.run.run : (xn ? 1 : -1);   // empty cells last
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.run.run - b.run.run;
    });
    state.rows.forEach(function (row) { state.tbody.appendChild(row.tr); });
    Array.prototype.forEach.call(document.querySelectorAll('#runs th'), function (th) {
      th.className = th.getAttribute('data-key') === col.key ? (dir > 0 ? 'sorted-asc' : 'sorted-desc') : '';
    });
    applyFilter();
  }

  function applyFilter() {
    var q = document.getElementById('filter').value.trim().toLowerCase();
    var st = document.getElementById('status-filter').value, shown = 0;
    state.rows.forEach(function (row) {
      var ok = (!st || row.run.status === st) && (!q || row.haystack.indexOf(q) >= 0);
      row.tr.hidden = !ok;
      if (ok) shown++;
      row.tr.classList.toggle('selected', row.run.run === state.selected);
    });
    var total = state.model.runs.length, more = document.getElementById('more-runs');
    document.getElementById('row-count').textContent = shown + ' of ' + state.rows.length + ' runs' +
      (state.rows.length < total ? ' loaded (' + total + ' in the log)' : '');
    more.hidden = state.rows.length >= total;
    if (!more.hidden) more.textContent = 'load ' + Math.min(state.model.pageRows || 500, total - state.rows.length) + ' more runs';
  }

  // ------------------------------------------------------------ one run, against another
  function defaultCompare(r) {
    var seg = state.model.segments[r.segment];
    if (!seg) return null;
    if (seg.bestRun !== null && seg.bestRun !== r.run) return seg.bestRun;
    return seg.baselineRun !== r.run ? seg.baselineRun : null;
  }

  function getDetails(n) {
    if (state.details[n]) return Promise.resolve(state.details[n]);
    if (!boot.live) return Promise.resolve(null);
    return fetch('api/run/' + encodeURIComponent(n)).then(function (res) {
      if (!res.ok) return null;
      return res.json().then(function (d) {
        if (d.row && mergeRow(d.row)) renderTable(state.model);
        if (!state.model.current || state.model.current.run !== n) state.details[n] = d;
        return d;
      });
    });
  }

  function select(n, scroll) {
    var r = runByNumber(n);
    if (!r) return Promise.resolve();
    state.selected = n;
    state.compare = defaultCompare(r);
    if (location.hash !== '#run=' + n) history.replaceState(null, '', '#run=' + n);
    applyFilter();
    return renderDetail(scroll);
  }

  function renderDetail(scroll) {
    var r = runByNumber(state.selected), cmp = state.compare !== null ? runByNumber(state.compare) : null;
    return Promise.all([getDetails(r.run), cmp ? getDetails(cmp.run) : Promise.resolve(null)]).then(function (ds) {
      if (state.selected !== r.run) return;
      r = runByNumber(r.run) || r;   // a paged run's full row came with its details
      cmp = cmp ? runByNumber(cmp.run) || cmp : null;
      drawDetail(r, ds[0] || {}, cmp, ds[1] || {});
      if (scroll) document.getElementById('detail').scrollIntoView();
    });
  }

  function kvRows(box, pairs) {
    pairs.forEach(function (p) {
      if (p[1] === '' || p[1] === null || p[1] === undefined) return;
      add(box, h('div', 'k', p[0]), h('div', 'v', p[1]));
    });
    return box;
  }

  function drawDetail(r, d, cmp, cd) {
    state.detailCharts.forEach(function (c) { c.destroy(); });
    state.detailCharts = [];
    var box = clear(document.getElementById('detail'));
    add(box, h('h2', null, 'Run #' + r.run));
    var head = h('div', 'detail-head');
    add(head, add(h('div'), badge(r.status), ' ', isNum(r.metric) ? fmt(r.metric) + ' ' + state.model.metricName : 'no metric',
      isNum(r.delta_pct) ? ' (' + deltaText(r.delta_pct) + '; the best then was ' + fmt(r.best_then) + ')' : ''));
    add(head, h('div', 'desc', r.description || '(no description)'));
    var e = d.energy;
    var metrics = r.metrics && typeof r.metrics === 'object' ? Object.keys(r.metrics).map(function (k) {
      return k + '=' + asText(r.metrics[k]); }).join('  ') : '';
    add(head, kvRows(h('div', 'kv'), [
      ['decision', r.reason], ['best before', fmt(r.best_before)], ['threshold', fmt(r.threshold)],
      ['confidence', isNum(r.confidence) ? r.confidence.toFixed(2) : ''], ['duration', duration(r.duration_s)],
      ['repeat of', isNum(r.repeat_of) ? '#' + r.repeat_of : ''],
      ['logged', when(r.timestamp)], ['commit', r.commit], ['ASI', asiText(r.asi)], ['metrics', metrics],
      ['energy', e ? (e.kwh * 1000).toFixed(1) + ' Wh · cost ' + e.cost.toFixed(3) + ' at ' + state.model.kwhPrice + ' per kWh' +
        (isNum(e.avgPowerW) ? ' · average ' + e.avgPowerW.toFixed(0) + ' W' : '') : ''],
      ['summary', d.summary ? Object.keys(d.summary).filter(function (k) { return k !== 'settings'; })
        .map(function (k) { return k + '=' + asText(d.summary[k]); }).join('  ') : '']
    ]));
    box.appendChild(head);
    var diag = r.diagnosis || d.diagnosis;
    if (diag) {
      var dg = add(h('div', 'diag'), h('h3', null, 'Diagnosis: ' + asText(diag.family || 'unknown')));
      add(dg, kvRows(h('div', 'kv'), [
        ['codes', Array.isArray(diag.codes) ? diag.codes.map(asText).join(', ') : asText(diag.codes || '')],
        ['explanation', diag.explanation ? asText(diag.explanation) : ''],
        ['fix', diag.fix && typeof diag.fix === 'object' ? Object.keys(diag.fix).map(function (k) {
          return k + ' = ' + asText(diag.fix[k]); }).join('\n') : ''],
        ['intermediates', diag.intermediates ? JSON.stringify(diag.intermediates) : '']
      ]));
      box.appendChild(dg);
    }
    drawCurves(box, r, d, cmp, cd);
    add(box, h('h3', null, 'Diff'));
    box.appendChild(diffView(d.diff));
    if (d.diffTruncated) add(box, h('div', 'muted', 'The diff was cut for the report; the whole of it: ' + d.diffTruncated));
    add(box, h('h3', null, 'Output (tail)'));
    box.appendChild(d.tail ? h('pre', null, d.tail) : h('div', 'empty', 'no output.log for this run'));
    if (d.checksTail) {
      add(box, h('h3', null, 'Checks output (tail)'));
      box.appendChild(h('pre', null, d.checksTail));
    }
    add(box, h('h3', null, 'Text sample'));
    box.appendChild(d.sample ? h('pre', 'sample', d.sample) : h('div', 'empty', 'no sample.txt for this run'));
    root.setAttribute('data-detail', String(r.run));
  }

  function compareSelect(r) {
    var sel = h('select');
    sel.id = 'compare';
    add(sel, (function () { var o = h('option', null, 'nothing'); o.value = ''; return o; })());
    state.model.runs.forEach(function (x) {
      if (x.run === r.run || (x.partial && x.run !== state.compare)) return;
      var o = h('option', null, '#' + x.run + ' ' + x.status + ' ' + fmt(x.metric) + ' · ' + x.description.slice(0, 60));
      o.value = String(x.run);
      if (x.run === state.compare) o.selected = true;
      sel.appendChild(o);
    });
    sel.addEventListener('change', function () {
      state.compare = sel.value === '' ? null : Number(sel.value);
      renderDetail(false);
    });
    return sel;
  }

  function drawCurves(box, r, d, cmp, cd) {
    add(box, h('h3', null, 'Training curves'));
    add(box, add(h('div', 'compare'), 'run #' + r.run + ' (orange) against ', compareSelect(r),
      cmp ? ' (blue' + (cmp.run === (state.model.segments[r.segment] || {}).bestRun ? ', the best run)' : ')') : ''));
    var grid = h('div', 'curves');
    box.appendChild(grid);
    var a = d.steps, b = cmp && cd ? cd.steps : null;
    if (!a && !b) { grid.appendChild(h('div', 'empty', 'no steps.jsonl for this run')); return; }
    if (a && isNum(a.lossNonFiniteAt)) add(box, h('div', 'diag', 'loss became NaN or infinite at step ' + a.lossNonFiniteAt));
    var xKey = (!a || a.cols.elapsed_s) && (!b || b.cols.elapsed_s) ? 'elapsed_s' : 'step';
    CURVES.forEach(function (c) {
      var sets = [], labels = [], colors = [];   // the comparison first, so the run itself is drawn on top
      if (b && b.cols[c[0]]) { sets.push(b); labels.push('#' + cmp.run); colors.push(COLORS.compare); }
      if (a && a.cols[c[0]]) { sets.push(a); labels.push('#' + r.run); colors.push(COLORS.current); }
      if (!sets.length) return;
      var chart = curveChart(grid, c[1], xKey, c[0], sets, labels, colors);
      state.detailCharts.push(chart);
    });
  }

  function columns(steps, xKey, yKey) {
    var xs = steps.cols[xKey] || [], ys = steps.cols[yKey] || [], outX = [], outY = [], last = -Infinity;
    for (var i = 0; i < xs.length; i++) {
      if (!isNum(xs[i]) || xs[i] < last) continue;   // uPlot wants x ascending
      last = xs[i]; outX.push(xs[i]); outY.push(isNum(ys[i]) ? ys[i] : null);
    }
    return [outX, outY];
  }

  function curveChart(parent, title, xKey, yKey, sets, labels, colors) {
    var wrap = add(h('div', 'curve'), h('div', 't', title));
    parent.appendChild(wrap);
    var data = sets.length === 1 ? columns(sets[0], xKey, yKey)
      : uPlot.join(sets.map(function (s) { return columns(s, xKey, yKey); }));
    var series = [{ label: xKey === 'elapsed_s' ? 'seconds' : 'step' }];
    labels.forEach(function (l, i) {
      series.push({ label: l, stroke: colors[i], width: 1.5, spanGaps: true, points: { show: false },
        value: function (u, v) { return fmt(v); } });
    });
    var chart = new uPlot({
      width: Math.max(300, (wrap.clientWidth || 420) - 10), height: 200, series: series,
      scales: { x: { time: false } }, legend: { show: true },
      axes: [{ label: xKey === 'elapsed_s' ? 'training seconds' : 'step', size: 36 },
        { size: 60, values: function (u, vals) { return vals.map(fmt); } }]
    }, data, wrap);
    state.charts++;
    root.setAttribute('data-charts', String(state.charts));
    return chart;
  }

  function diffView(diff) {
    if (!diff) return h('div', 'empty', 'no diff for this run (no diff.patch and no refs/autoresearch/runs ref)');
    var pre = h('pre', 'diff');
    diff.split('\n').forEach(function (line) {
      var cls = line.indexOf('diff ') === 0 || line.indexOf('+++') === 0 || line.indexOf('---') === 0 ? 'file'
        : line[0] === '+' ? 'add' : line[0] === '-' ? 'del' : line.indexOf('@@') === 0 ? 'hunk' : null;
      pre.appendChild(h('span', cls, line + '\n'));
    });
    return pre;
  }

  // ------------------------------------------------------------ cost panel
  function money(v) { return isNum(v) ? '$' + (v >= 100 ? v.toFixed(0) : v.toFixed(2)) : '–'; }
  function renderCost(m) {
    var box = document.getElementById('cost-panel'), led = m.ledger;
    if (!led || !led.totals) { box.hidden = true; return; }
    box.hidden = false;
    var t = led.totals, a = t.agent, cards = clear(document.getElementById('cost-cards'));
    add(cards,
      card('agent cost', money(a.cost_usd), a.tokens.toLocaleString() + ' tokens in ' + a.messages + ' answers'),
      card('cost per kept improvement', money(t.cost_per_improvement_usd), t.improvements + ' improvement(s)'),
      card('tokens', a.input_tokens.toLocaleString() + ' in / ' + a.output_tokens.toLocaleString() + ' out',
        a.cache_read_tokens.toLocaleString() + ' cache reads, ' + a.cache_write_tokens.toLocaleString() + ' cache writes'),
      card('GPU hours', isNum(t.gpu_hours) ? t.gpu_hours.toFixed(2) : '–',
        isNum(t.runs_per_gpu_hour) ? t.runs_per_gpu_hour.toFixed(1) + ' runs per GPU-hour' : ''));
    var n = led.night;
    if (n) add(cards, card('night', n.resumes + ' resume(s)', n.ended ? 'ended: ' + n.ended : 'running'));
    var log = clear(document.getElementById('night-log'));
    add(log, h('div', null, 'prices: ' + t.prices_source));
    if (n) n.events.forEach(function (e) {
      var what = e.event === 'exit' ? 'Claude Code exited (rc ' + e.rc + ', ' + e.runs + ' new run(s))' + (e.error ? ': ' + e.error : '')
        : e.event === 'resume' ? 'resumed after ' + e.wait_s + ' s: ' + e.why
        : e.event === 'end' ? 'night ended: ' + e.reason : 'started session ' + e.session;
      add(log, h('div', 'night-event', when(e.timestamp) + ' · ' + what));
    });
    var el = document.getElementById('cost-curve');
    if (state.costChart) { state.costChart.destroy(); state.costChart = null; }
    if (!led.perRun.length) return;
    var xs = led.perRun.map(function (r) { return r.run; }), ys = led.perRun.map(function (r) { return r.cumulative; });
    state.costChart = new uPlot({
      width: chartWidth(el), height: 220, scales: { x: { time: false } }, legend: { show: true },
      series: [{ label: 'run' }, { label: 'cumulative cost', stroke: '#b45309', width: 2, points: { show: true, size: 5 },
        value: function (u, v) { return money(v); } }],
      axes: [{ label: 'run', size: 36, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
        { size: 60, values: function (u, vals) { return vals.map(money); } }]
    }, [xs, ys], el);
    state.charts++;
  }

  // ------------------------------------------------------------ live view
  function renderCurrent(cur) {
    var box = document.getElementById('current-box');
    if (!cur || cur.run === null || cur.run === undefined) {
      box.hidden = true; state.currentRun = null;
      Object.keys(state.currentCharts).forEach(function (k) { state.currentCharts[k].destroy(); });
      state.currentCharts = {}; clear(document.getElementById('current-charts'));
      return;
    }
    box.hidden = false;
    var segs = state.model ? state.model.segments : [], last = segs.length ? segs[segs.length - 1] : null;
    var bestRun = last && last.bestRun !== null ? last.bestRun : null;
    var best = bestRun !== null && state.details[bestRun] ? state.details[bestRun].steps : null;
    if (bestRun !== null && !state.details[bestRun]) getDetails(bestRun);   // drawn from the next poll on
    document.getElementById('current-title').textContent = 'Running now: #' + cur.run +
      (cur.description ? ' · ' + cur.description : '') + (cur.phase ? ' · ' + cur.phase : '') +
      (cur.steps ? ' · ' + cur.steps.total + ' steps logged' : '') + (best ? ' · against the best run #' + bestRun : '');
    var grid = document.getElementById('current-charts');
    if (state.currentRun !== cur.run) {
      Object.keys(state.currentCharts).forEach(function (k) { state.currentCharts[k].destroy(); });
      state.currentCharts = {}; clear(grid); state.currentRun = cur.run;
    }
    if (!cur.steps) return;
    var xKey = cur.steps.cols.elapsed_s && (!best || best.cols.elapsed_s) ? 'elapsed_s' : 'step';
    var key = best ? 'with-best-' + bestRun : 'alone';
    if (state.currentKey !== key) {   // the best run's curves arrived or changed: draw afresh
      Object.keys(state.currentCharts).forEach(function (k) { state.currentCharts[k].destroy(); });
      state.currentCharts = {}; clear(grid); state.currentKey = key;
    }
    CURVES.forEach(function (c) {
      if (!cur.steps.cols[c[0]]) return;
      var sets = [cur.steps], labels = ['#' + cur.run], colors = [COLORS.current];
      if (best && best.cols[c[0]]) {   // the best run underneath, the running one on top
        sets.unshift(best); labels.unshift('#' + bestRun + ' (best)'); colors.unshift(COLORS.compare);
      }
      var data = sets.length === 1 ? columns(cur.steps, xKey, c[0])
        : uPlot.join(sets.map(function (st) { return columns(st, xKey, c[0]); }));
      if (state.currentCharts[c[0]]) state.currentCharts[c[0]].setData(data);
      else state.currentCharts[c[0]] = curveChart(grid, c[1], xKey, c[0], sets, labels, colors);
    });
    root.setAttribute('data-current-steps', String(cur.steps.total));
  }

  function setLive(text, stale) {
    var el = document.getElementById('live');
    el.hidden = false; el.textContent = text; el.className = 'live' + (stale ? ' stale' : '');
  }

  function poll() {
    var url = 'api/model' + (state.version ? '?since=' + encodeURIComponent(state.version) : '');
    return Promise.all([
      fetch(url, { cache: 'no-store' }).then(function (res) { return res.json(); }),
      fetch('api/current', { cache: 'no-store' }).then(function (res) { return res.json(); })
    ]).then(function (got) {
      if (!got[0].unchanged) { state.version = got[0].version; show(got[0].model); }
      renderCurrent(got[1]);
      setLive('live · updated ' + new Date().toLocaleTimeString(), false);
    }, function (err) {
      setLive('live · server not answering, retrying (' + (err && err.message || err) + ')', true);
    });
  }

  // ------------------------------------------------------------ start
  function show(m) {
    m = unpack(m);
    var first = !state.model;
    state.model = m;
    renderHeader(m); renderSummary(m); renderProgress(m); renderHoldout(m); renderWaves(m); renderCost(m); renderTable(m);
    var linked = /^#run=(-?\d+)$/.exec(location.hash);
    if (first && linked && runByNumber(Number(linked[1]))) state.selected = Number(linked[1]);
    var keep = state.selected !== null && runByNumber(state.selected);
    var last = m.segments.length ? m.segments[m.segments.length - 1] : null;
    var pick = keep ? state.selected : last && last.bestRun !== null ? last.bestRun : m.runs.length ? m.runs[m.runs.length - 1].run : null;
    var done = pick === null ? Promise.resolve() : keep && !first ? Promise.resolve(applyFilter()) : select(pick, !!(first && linked));
    return done;
  }

  function ready() { root.setAttribute('data-charts', String(state.charts)); root.setAttribute('data-ready', '1'); }

  document.getElementById('filter').addEventListener('input', applyFilter);
  document.getElementById('more-runs').addEventListener('click', function () { loadMore(); });
  document.getElementById('status-filter').addEventListener('change', applyFilter);
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      var el = document.getElementById('progress');
      if (state.progress) state.progress.setSize({ width: chartWidth(el), height: 400 });
    }, 150);
  });

  if (boot.live) {
    poll().then(ready);
    setInterval(poll, 2000);
  } else {
    show(boot.model).then(ready);
  }
})();
