// draftlattice HTML report: prompt/row switching and the per-step detail view.
// Data comes from the JSON island (JSON.parse); every string goes into the DOM through
// textContent, never innerHTML. document.body.dataset.ready = "1" once set up (tests wait on it);
// an uncaught error is recorded in document.body.dataset.jsError.
(function () {
  "use strict";
  window.addEventListener("error", function (e) { document.body.dataset.jsError = String(e.message); });
  var data = JSON.parse(document.getElementById("run-data").textContent);
  var select = document.getElementById("prompt-select");
  var tabs = Array.prototype.slice.call(document.querySelectorAll(".tab"));
  var detail = document.getElementById("step-detail");
  var state = { prompt: 0, row: 0, step: null };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function panelKey() { return "p" + state.prompt + "-r" + state.row; }
  function panelEl() { return document.getElementById("panel-" + panelKey()); }
  function steps() { return data.panels[panelKey()] || []; }

  function chips(parent, tokens, classOf) {
    tokens.forEach(function (t, i) { parent.appendChild(el("span", "chip " + (classOf ? classOf(i) : ""), t)); });
    return parent;
  }

  function latticeTable(s) {
    var table = el("table", "lattice"), head = el("tr");
    head.appendChild(el("th", "", "rank"));
    s.lattice.forEach(function (_, j) { head.appendChild(el("th", "", "head " + (j + 2) + " (+" + (j + 1) + ")")); });
    table.appendChild(el("thead")).appendChild(head);
    var body = table.appendChild(el("tbody"));
    var k = Math.max.apply(null, s.lattice.map(function (c) { return c.length; }));
    for (var r = 0; r < k; r++) {
      var tr = body.appendChild(el("tr"));
      tr.appendChild(el("th", "", String(r + 1)));
      s.lattice.forEach(function (column, j) {
        var td = tr.appendChild(el("td", s.path[j] === r ? "path" : ""));
        if (r >= column.length) return;
        td.style.setProperty("--p", String(column[r][1]));
        td.appendChild(el("span", "tokstr", column[r][0]));
        td.appendChild(el("span", "prob", column[r][1].toFixed(3)));
      });
    }
    return table;
  }

  function draftList(title, drafts, chosenIndex, accepted, note) {
    var box = el("div", "drafts-box");
    box.appendChild(el("h4", "", title));
    var ol = box.appendChild(el("ol", "drafts"));
    drafts.forEach(function (d, i) {
      var li = ol.appendChild(el("li", i === chosenIndex ? "chosen" : ""));
      chips(li, d, i === chosenIndex ? function (t) { return t < accepted ? "acc" : t === accepted ? "rej" : ""; } : null);
      if (i === chosenIndex) li.appendChild(el("span", "badge", note));
    });
    return box;
  }

  function render(index) {
    var all = steps(), s = all[index];
    detail.replaceChildren();
    if (!s) { detail.appendChild(el("p", "hint", "Hover or click a token of the text.")); return; }
    detail.appendChild(el("h3", "", "Step " + (index + 1) + " of " + all.length + ": " + s.committed.length +
      " token(s), " + s.accepted + " from the accepted draft, " + s.own + " the target's own"));
    chips(detail.appendChild(el("p", "committed")), s.committed, function (i) { return i < s.own ? "own" : "acc"; });
    if (s.lattice) {
      detail.appendChild(el("h4", "", "Lattice: top-" + s.lattice[0].length + " tokens of heads 2.." + (s.lattice.length + 1) +
        " (outlined: accepted)"));
      detail.appendChild(latticeTable(s));
    } else {
      detail.appendChild(el("p", "missing", "No lattice recorded for this step."));
    }
    var pair = detail.appendChild(el("div", "drafts-pair"));
    var acceptedNote = s.accepted + " accepted";
    if (s.before) {
      pair.appendChild(draftList("Drafts by the heads alone", s.before, s.before_rank, s.accepted,
        s.chosen_in === "after" ? "the accepted draft (" + acceptedNote + ")" : acceptedNote));
    }
    if (s.after) pair.appendChild(draftList("Verified (rescored, or the best prefixes)", s.after, s.chosen, s.accepted, acceptedNote));
    if (!s.before && !s.after) detail.appendChild(el("p", "missing", "No drafts recorded for this step."));
  }

  function mark(index) {
    var panel = panelEl();
    if (!panel) return;
    Array.prototype.forEach.call(panel.querySelectorAll(".tok.sel"), function (t) { t.classList.remove("sel"); });
    Array.prototype.forEach.call(panel.querySelectorAll('.tok[data-step="' + index + '"]'), function (t) { t.classList.add("sel"); });
  }

  function pin(index, updateHash) {
    var n = steps().length;
    state.step = n ? Math.max(0, Math.min(n - 1, index)) : null;
    render(state.step);
    mark(state.step);
    if (updateHash && state.step !== null) history.replaceState(null, "", "#" + panelKey() + "-s" + state.step);
  }

  function firstLatticeStep() {
    var all = steps();
    for (var j = 0; j < all.length; j++) if (all[j].lattice) return j;
    return 0;
  }

  function show(prompt, row, step) {
    state.prompt = prompt; state.row = row;
    Array.prototype.forEach.call(document.querySelectorAll(".panel"), function (p) {
      p.hidden = !(Number(p.dataset.prompt) === prompt && Number(p.dataset.row) === row);
    });
    tabs.forEach(function (t) { t.setAttribute("aria-selected", String(Number(t.dataset.row) === row)); });
    if (select) select.value = String(prompt);
    pin(step === undefined ? firstLatticeStep() : step, false);
  }

  function fromHash() {
    var m = /^#p(\d+)-r(\d+)(?:-s(\d+))?$/.exec(location.hash);
    if (m && document.getElementById("panel-p" + m[1] + "-r" + m[2])) {
      show(Number(m[1]), Number(m[2]), m[3] === undefined ? undefined : Number(m[3]));
      return true;
    }
    return false;
  }

  if (select) select.addEventListener("change", function () { show(Number(select.value), state.row); });
  tabs.forEach(function (t) { t.addEventListener("click", function () { show(state.prompt, Number(t.dataset.row)); }); });
  var panels = document.querySelector(".panels");
  function stepOf(e) { var t = e.target.closest(".tok"); return t && t.dataset.step !== undefined ? Number(t.dataset.step) : null; }
  panels.addEventListener("mouseover", function (e) { var j = stepOf(e); if (j !== null) { render(j); mark(j); } });
  panels.addEventListener("mouseleave", function () { render(state.step); mark(state.step); });
  panels.addEventListener("click", function (e) { var j = stepOf(e); if (j !== null) pin(j, true); });
  document.addEventListener("keydown", function (e) {
    if (state.step === null || e.target === select) return;
    if (e.key === "ArrowRight") pin(state.step + 1, true);
    if (e.key === "ArrowLeft") pin(state.step - 1, true);
  });
  window.addEventListener("hashchange", fromHash);
  if (!fromHash()) show(0, 0);
  document.body.dataset.ready = "1";
})();
