// Live app pages (apps_registry/pages/live.py): poll the app's changes counter; when it moved, fetch this page
// again (its filters are in its URL) and swap in each part marked data-live-part, except a part the person is
// using (focus inside, a row's form opened, a field typed in or a picker searched): that one is swapped at a
// later poll. Notices (what an action did) stay where they are. Without JavaScript nothing polls: reload.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.fetch || !window.DOMParser) return;
  var url = live.getAttribute("data-live-url");
  var changes = live.getAttribute("data-live-changes");
  var pollMs = parseInt(live.getAttribute("data-live-poll-ms"), 10) || 1000;
  var timer = null;
  var stale = false; // a refresh left parts in use unswapped: try them again at the next poll
  var stopped = false;
  var asking = false; // a poll (and the refresh it led to) under way

  function say(text) {
    live.textContent = text;
    live.hidden = false;
  }

  function edited(field) {
    if (field.type === "hidden" || field.type === "submit") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT" && !field.multiple) {
      // with no option marked selected, the first one is: that is not a choice the person made
      var drawn = 0;
      for (var k = 0; k < field.options.length; k++) if (field.options[k].defaultSelected) drawn = k;
      return field.selectedIndex !== drawn;
    }
    if (field.tagName === "SELECT") {
      for (var i = 0; i < field.options.length; i++) {
        if (field.options[i].selected !== field.options[i].defaultSelected) return true;
      }
      return false;
    }
    return field.value !== field.defaultValue;
  }

  function inUse(part) {
    var active = document.activeElement;
    if (active && active !== document.body && part.contains(active)) return true;
    if (part.querySelector("details.row-action[open]")) return true;
    var fields = part.matches("select") ? [part] : part.querySelectorAll("input, select, textarea");
    for (var i = 0; i < fields.length; i++) {
      if (edited(fields[i])) return true;
    }
    var search = part.matches("select.picker") && part.parentNode.querySelector(".picker-search");
    return Boolean(search && search.value);
  }

  function keepNotices(part, fresh) {
    // A notice in the part (a row action's result in "Recently added") stays, in its card if the card is still there.
    var notices = part.querySelectorAll(".notice");
    for (var i = 0; i < notices.length; i++) {
      var notice = notices[i];
      var place = notice.id.replace(/-notice$/, "");
      var card = fresh.querySelector("#" + CSS.escape(place));
      if (!card || fresh.querySelector("#" + CSS.escape(notice.id))) continue;
      notice.removeAttribute("autofocus");
      var heading = card.querySelector("h3, h4");
      if (heading) heading.after(notice);
      else card.prepend(notice);
    }
  }

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var next = doc.getElementById("live");
    var busy = false;
    var parts = document.querySelectorAll("[data-live-part]");
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      if (!part.id || !document.body.contains(part)) continue; // inside a part swapped already
      var fresh = doc.getElementById(part.id);
      if (!fresh) continue;
      if (inUse(part)) {
        busy = true;
        continue;
      }
      fresh = document.importNode(fresh, true);
      keepNotices(part, fresh);
      var autofocused = fresh.querySelectorAll("[autofocus]");
      for (var j = 0; j < autofocused.length; j++) autofocused[j].removeAttribute("autofocus");
      part.replaceWith(fresh);
      if (window.htmx) window.htmx.process(fresh);
    }
    stale = busy;
    if (next) changes = next.getAttribute("data-live-changes");
  }

  function refresh() {
    var page = location.href.split("#")[0];
    return fetch(page, { credentials: "same-origin", cache: "no-store", headers: { "X-Charming-Live": "1" } }).then(
      function (response) {
        if (!response.ok) throw new Error("page " + response.status);
        return response.text().then(swap);
      },
    );
  }

  function poll() {
    timer = null;
    if (stopped || asking) return;
    if (document.hidden) return; // polled again when the tab is shown
    asking = true;
    var asked = fetch(url + "&since=" + encodeURIComponent(changes), { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.status === 204) return stale ? refresh() : null;
        if (response.ok) return refresh();
        if (response.status === 403 || response.status === 404) {
          stopped = true;
          return response.json().then(function (body) {
            say(body.error || "This page no longer follows changes: reload it.");
          });
        }
        return null; // the server is busy or restarting: ask again at the next poll
      })
      .catch(function () {
        return null; // offline for a moment: the next poll tries again
      });
    asked.then(function () {
      asking = false;
      schedule();
    });
  }

  function schedule() {
    if (!stopped && timer === null && !document.hidden) timer = setTimeout(poll, pollMs);
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null) poll();
  });
  // An action's htmx swap replaces <main> with a page drawn after the action: follow its counter.
  document.body.addEventListener("htmx:afterSwap", function () {
    var swapped = document.getElementById("live");
    if (swapped && swapped !== live) {
      live = swapped;
      changes = live.getAttribute("data-live-changes");
    }
  });
  schedule();
})();
