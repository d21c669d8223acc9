// Keeps an add-on page's status current while a sync runs, without a
// reload. The page works without it: it only refreshes the phase, the
// message, the running hook, the waiting wave and the conditions from the API, with the
// session cookie, and writes them as text, never as markup.
(function () {
  var card = document.querySelector("[data-live]");
  if (!card) { return; }
  var url = card.getAttribute("data-live");
  function set(field, text) {
    var el = card.querySelector('[data-field="' + field + '"]');
    if (el) { el.textContent = text; }
  }
  function since(t) {
    var d = new Date(t);
    return isNaN(d) ? "" : " since " + d.toISOString().slice(11, 19);
  }
  function conditions(list) {
    var body = card.querySelector('[data-field="conditions"]');
    if (!body) { return; }
    var rows = document.createDocumentFragment();
    list.forEach(function (c) {
      var tr = document.createElement("tr");
      [c.type, c.status, c.reason, c.message].forEach(function (v) {
        var td = document.createElement("td");
        td.textContent = v || "";
        tr.appendChild(td);
      });
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
  }
  function tick() {
    fetch(url, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (!a || !a.status) { return; }
      var phase = a.status.phase || "Pending";
      var el = card.querySelector('[data-field="phase"]');
      if (el) { el.textContent = phase; el.className = "phase phase-" + (a.status.phase || ""); }
      var list = a.status.conditions || [];
      var ready = list.filter(function (c) { return c.type === "Ready"; })[0];
      if (ready) { set("message", ready.message); }
      var h = a.status.hook;
      set("hook", h ? "Running hook " + h.event + " " + h.kind + " " + h.name + since(h.since) : "");
      var w = a.status.wave;
      set("wave", w ? "Wave " + w.wave + " waits" + since(w.since) + (w.deleting ? " to be deleted, until the waves after it are gone: " : " for the waves before it: ") + (w.waiting || "") : "");
      conditions(list);
    }).catch(function () {}).then(function () { setTimeout(tick, 2000); });
  }
  setTimeout(tick, 2000);
})();
