// Draws the op x dtype matrix and the failures table of index.html from the
// embedded JSON (see reports/to_html.py: page_data). Test strings are written with
// textContent or title only. Filters are kept in the URL hash, e.g.
// #outcome=failed&suite=compare_cpu&family=linalg&class=numeric&q=conv
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var S = D.strings, C = {};
  D.columns.forEach(function (name, i) { C[name] = i; });
  var FAILING = {}; D.failing.forEach(function (o) { FAILING[o] = true; });
  var SYMBOL = { passed: "\u2713", failed: "\u2717", error: "!", xfailed: "x", xpassed: "X", "no-reference": "?", "expected-unreached": "~", "not-claimed": "n", skipped: "\u2013" };
  var PAGE = 500;
  var str = function (row, col) { var i = row[C[col]]; return i < 0 ? null : S[i]; };
  var sev = function (o) { return o in D.severity ? D.severity[o] : 6; };
  var fmt = function (x) { return x === null || x === undefined ? "" : (Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : String(+x.toPrecision(3))); };
  var controls = { suite: "f-suite", outcome: "f-outcome", "class": "f-class", family: "f-family", q: "f-q" };
  var state = {};

  function readHash() {
    var src = location.hash.length > 1 ? location.hash.slice(1) : location.search.slice(1);
    var p = new URLSearchParams(src);
    Object.keys(controls).forEach(function (k) {
      var el = document.getElementById(controls[k]);
      var v = p.get(k) || "";
      if (el.tagName === "SELECT" && v && !Array.prototype.some.call(el.options, function (o) { return o.value === v; })) {
        var opt = document.createElement("option"); opt.value = v; opt.textContent = v; el.appendChild(opt);
      }
      el.value = v; state[k] = v;
    });
  }
  function writeHash() {
    var p = new URLSearchParams();
    Object.keys(controls).forEach(function (k) { if (state[k]) p.set(k, state[k]); });
    var h = p.toString();
    history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }
  function matches(row) {
    var o = str(row, "outcome");
    if (state.outcome === "failing" ? !FAILING[o] : (state.outcome && o !== state.outcome)) return false;
    if (state.suite && str(row, "suite") !== state.suite) return false;
    if (state["class"] && str(row, "failure_class") !== state["class"]) return false;
    if (state.family && str(row, "family") !== state.family) return false;
    if (state.q) {
      var name = (str(row, "op") || "").toLowerCase();
      if (name.indexOf(state.q.toLowerCase()) < 0) return false;
    }
    return true;
  }

  // ---- matrix ------------------------------------------------------------
  var matrix = document.getElementById("matrix");
  var dcol = {}; D.dtypes.forEach(function (d, i) { dcol[d] = i; });
  var byOp = {}, opNames = [];
  D.rows.forEach(function (row, i) {
    var kind = str(row, "kind");
    if (kind !== null && kind !== "op") return;
    var op = str(row, "op") || "(none)";
    if (!(op in byOp)) { byOp[op] = []; opNames.push(op); }
    byOp[op].push(i);
  });
  opNames.sort();
  var head = document.createElement("tr");
  var corner = document.createElement("th"); corner.textContent = "op \\ dtype"; head.appendChild(corner);
  D.dtypes.forEach(function (d) { var th = document.createElement("th"); th.textContent = d; head.appendChild(th); });
  matrix.tHead.appendChild(head);
  var body = matrix.tBodies[0], opRows = [];
  opNames.forEach(function (op) {
    var tr = document.createElement("tr");
    tr.className = "op-row"; tr.setAttribute("data-op", op);
    var th = document.createElement("th"); th.className = "name"; th.textContent = op; tr.appendChild(th);
    var tds = D.dtypes.map(function (d) {
      var td = document.createElement("td"); td.setAttribute("data-dtype", d); tr.appendChild(td); return td;
    });
    body.appendChild(tr);
    opRows.push({ op: op, tr: tr, tds: tds });
  });

  function drawMatrix() {
    var shown = 0;
    opRows.forEach(function (r) {
      var agg = D.dtypes.map(function () { return null; });
      byOp[r.op].forEach(function (i) {
        var row = D.rows[i];
        if (!matches(row)) return;
        var d = str(row, "dtype"); var j = dcol[d === null ? "(none)" : d];
        var a = agg[j] || (agg[j] = { worst: null, counts: {}, abs: null, rel: null, ulp: null, head: null, atol: null, rtol: null, cls: {} });
        var o = str(row, "outcome");
        a.counts[o] = (a.counts[o] || 0) + 1;
        if (a.worst === null || sev(o) > sev(a.worst)) a.worst = o;
        [["abs", "max_abs"], ["rel", "max_rel"], ["ulp", "max_ulp"], ["atol", "atol"], ["rtol", "rtol"]].forEach(function (p) {
          var v = row[C[p[1]]]; if (v !== null && (a[p[0]] === null || v > a[p[0]])) a[p[0]] = v;
        });
        var h = row[C.headroom]; if (h !== null && (a.head === null || h < a.head)) a.head = h;
        var c = str(row, "failure_class"); if (c) a.cls[c] = true;
      });
      var any = false;
      r.tds.forEach(function (td, j) {
        var a = agg[j];
        if (!a) { td.className = "cell empty"; td.textContent = ""; td.title = ""; return; }
        any = true;
        td.className = "cell o-" + a.worst; td.textContent = SYMBOL[a.worst] || "?";
        var lines = [r.op + " \u00b7 " + D.dtypes[j], Object.keys(a.counts).map(function (o) { return a.counts[o] + " " + o; }).join(", ")];
        var cls = Object.keys(a.cls); if (cls.length) lines.push("failure class: " + cls.join(", "));
        var err = [];
        if (a.abs !== null) err.push("max_abs " + fmt(a.abs) + (a.atol !== null ? " (atol " + fmt(a.atol) + ")" : ""));
        if (a.rel !== null) err.push("max_rel " + fmt(a.rel) + (a.rtol !== null ? " (rtol " + fmt(a.rtol) + ")" : ""));
        if (a.ulp !== null) err.push("max_ulp " + fmt(a.ulp));
        if (err.length) lines.push(err.join(", "));
        if (a.head !== null) lines.push("headroom (tolerance / error) " + fmt(a.head) + "\u00d7");
        td.title = lines.join("\n");
      });
      r.tr.hidden = !any;
      if (any) shown++;
    });
    return shown;
  }

  // ---- failures table ----------------------------------------------------
  var ftable = document.getElementById("failures"), fbody = ftable.tBodies[0];
  var more = document.getElementById("more"), list = [], drawn = 0;
  function tableOutcome(o) {
    if (!state.outcome || state.outcome === "failing") return !!FAILING[o];
    return o === state.outcome && o !== "passed";
  }
  function td(tr, text, cls) {
    var cell = document.createElement("td"); if (cls) cell.className = cls;
    cell.textContent = text === null || text === undefined ? "" : String(text); tr.appendChild(cell); return cell;
  }
  // A long or multi-line message: its first line, the whole text in a wide, scrolling <pre> when opened.
  function message(tr, text) {
    text = text === null || text === undefined ? "" : String(text);
    var first = text.split("\n")[0];
    if (text.indexOf("\n") < 0 && text.length <= 200) return td(tr, text, "msg");
    var cell = document.createElement("td"); cell.className = "msg";
    var det = document.createElement("details"), sum = document.createElement("summary"), pre = document.createElement("pre");
    sum.textContent = first.length > 200 ? first.slice(0, 200) + "…" : first;
    pre.className = "wide"; pre.textContent = text;
    det.appendChild(sum); det.appendChild(pre); cell.appendChild(det); tr.appendChild(cell);
    return cell;
  }
  function drawMore() {
    var end = Math.min(list.length, drawn + PAGE), frag = document.createDocumentFragment();
    for (; drawn < end; drawn++) {
      var row = D.rows[list[drawn]], det = row[C.detail] >= 0 ? D.details[row[C.detail]] : {};
      var tr = document.createElement("tr"); tr.className = "failure-row";
      var o = str(row, "outcome");
      td(tr, o, "o-" + o); td(tr, str(row, "failure_class")); td(tr, str(row, "suite"));
      var name = td(tr, str(row, "op") || det.nodeid); name.title = det.nodeid || "";
      td(tr, str(row, "variant")); td(tr, str(row, "dtype")); td(tr, row[C.sample]);
      var err = [];
      if (row[C.max_abs] !== null) err.push("abs " + fmt(row[C.max_abs]));
      if (row[C.max_ulp] !== null) err.push("ulp " + fmt(row[C.max_ulp]));
      if (row[C.headroom] !== null) err.push("headroom " + fmt(row[C.headroom]));
      td(tr, err.join(", "));
      message(tr, det.message);
      var rc = document.createElement("td"), code = document.createElement("code");
      code.textContent = det.repro || ""; rc.appendChild(code); tr.appendChild(rc);
      frag.appendChild(tr);
    }
    fbody.appendChild(frag);
    more.hidden = drawn >= list.length;
  }
  function drawFailures() {
    list = [];
    D.rows.forEach(function (row, i) { if (tableOutcome(str(row, "outcome")) && matches(row)) list.push(i); });
    list.sort(function (a, b) {
      var ra = D.rows[a], rb = D.rows[b];
      var d = sev(str(rb, "outcome")) - sev(str(ra, "outcome"));
      if (d) return d;
      var oa = str(ra, "op") || "", ob = str(rb, "op") || "";
      return oa < ob ? -1 : oa > ob ? 1 : a - b;
    });
    while (fbody.firstChild) fbody.removeChild(fbody.firstChild);
    drawn = 0; drawMore();
    document.getElementById("failures-status").textContent = list.length
      ? list.length + " record(s) match the filters" + (list.length > PAGE ? "; the first " + Math.min(drawn, list.length) + " are shown" : "")
      : "No failing records match the filters.";
  }
  more.addEventListener("click", drawMore);

  function apply() {
    var shown = drawMatrix();
    drawFailures();
    var n = 0; D.rows.forEach(function (row) { if (matches(row)) n++; });
    document.getElementById("filter-status").textContent = n + " of " + D.rows.length + " records match; " + shown + " of " + opRows.length + " ops shown";
    document.body.setAttribute("data-ready", "1");
  }
  Object.keys(controls).forEach(function (k) {
    document.getElementById(controls[k]).addEventListener(k === "q" ? "input" : "change", function (ev) {
      state[k] = ev.target.value; writeHash(); apply();
    });
  });
  window.addEventListener("hashchange", function () { readHash(); apply(); });
  readHash();
  apply();
})();
