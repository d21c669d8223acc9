// Keeps an add-on page's status current while a sync runs, without a
// reload. The page works without it: it only refreshes the phase, the
// message and the running hook from the API, with the session cookie.
(function () {
  var card = document.querySelector("[data-live]");
  if (!card) { return; }
  var url = card.getAttribute("data-live");
  function set(field, text) {
    var el = card.querySelector('[data-field="' + field + '"]');
    if (el) { el.textContent = text; }
  }
  function tick() {
    fetch(url, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (!a || !a.status) { return; }
      var phase = a.status.phase || "";
      var el = card.querySelector('[data-field="phase"]');
      if (el) { el.textContent = phase; el.className = "phase phase-" + phase; }
      var ready = (a.status.conditions || []).filter(function (c) { return c.type === "Ready"; })[0];
      if (ready) { set("message", ready.message); }
      var h = a.status.hook;
      set("hook", h ? "Running hook " + h.event + " " + h.kind + " " + h.name : "");
    }).catch(function () {}).then(function () { setTimeout(tick, 2000); });
  }
  setTimeout(tick, 2000);
})();
