/* Charming inline in a chat (MCP Apps, ui://charming/app). The host's open_app result carries the app page's own
   HTML (rendered and escaped by the server: apps_registry/pages/inline.py); this script only puts it in place and
   turns its forms into tools/call through the host bridge: a mutation's form or a row's button into mutate_app, a
   view's filter into open_app (which runs that query), then open_app again to refresh. It never fetches anything
   itself (the document's CSP: connect-src 'none'; form-action 'none'), and no author script ever runs: the HTML
   holds none, and this file is the document's only script besides the vendored ext-apps App. */
(function () {
  "use strict";
  var sdk = window.McpExtApps;
  var root = document.getElementById("app");
  var HTML_META = "io.charming/html";
  var state = { appId: null, view: null, params: {}, routes: {} };
  var app = new sdk.App({ name: "Charming", version: "1.0.0" }, {}, { autoResize: true });

  function say(text, kind) {
    root.textContent = "";
    var p = document.createElement("p");
    p.className = kind === "error" ? "notice notice-error" : "aside";
    p.textContent = text;
    root.appendChild(p);
  }

  function textOf(result) {
    return (result.content || []).filter(function (c) { return c.type === "text"; }).map(function (c) { return c.text; }).join("\n");
  }

  function show(result) {
    var sc = result && result.structuredContent;
    if (!sc || !sc.ok) {
      say((sc && sc.error && sc.error.message) || textOf(result || {}) || "The app could not be opened.", "error");
      return false;
    }
    var value = sc.value;
    state.appId = value.app.id;
    state.view = value.view;
    state.params = value.params || {};
    state.routes = {};
    (value.routes || []).forEach(function (r) { state.routes[r.name] = r; });
    var html = result._meta && result._meta[HTML_META];
    if (typeof html !== "string") {
      say(textOf(result));
      return true;
    }
    var scroll = window.scrollY;
    root.innerHTML = html;
    // Links lead to Charming's own pages: inside the host's iframe they would leave the chat. A view's page links
    // (its filters and cursor in the query) become open_app calls; the others are text.
    root.querySelectorAll("a[href]").forEach(function (a) {
      var href = a.getAttribute("href");
      if (href.charAt(0) === "#") return;
      var link = viewLink(href);
      a.removeAttribute("href");
      if (link) { a.dataset.view = link.view; a.dataset.params = JSON.stringify(link.params); a.tabIndex = 0; a.setAttribute("role", "link"); }
      else a.classList.add("inline-link-off");
    });
    window.scrollTo(0, scroll);
    return true;
  }

  // "/apps/<id>/?list.category=food&list.cursor=...#view-list" -> {view: "list", params: {category, cursor}}.
  function viewLink(href) {
    var url;
    try { url = new URL(href, "https://charming.invalid"); } catch (e) { return null; }
    var view = url.hash.indexOf("#view-") === 0 ? decodeURIComponent(url.hash.slice(6)) : "";
    var route = state.routes[view];
    if (!route || route.kind !== "query") return null;
    var prefix = view + ".";
    var params = {};
    var rowsPaging = false;
    url.searchParams.forEach(function (raw, key) {
      if (key.indexOf(view + ":") === 0) rowsPaging = true;
      if (key.indexOf(prefix) !== 0 || raw.trim() === "") return;
      var path = key.slice(prefix.length).split(".");
      var prop = schemaAt(route.input, path);
      setAt(params, path, typeOf(prop) === "array" && !prop.items ? [raw] : typed(prop, raw));
    });
    return rowsPaging ? null : { view: view, params: params }; // a long table's own pages stay on the page
  }

  function typeOf(schema) {
    var t = schema && schema.type;
    if (Array.isArray(t)) { t = t.filter(function (x) { return x !== "null"; }); t = t.length === 1 ? t[0] : null; }
    return typeof t === "string" ? t : null;
  }

  function schemaAt(schema, path) {
    var node = schema || {};
    for (var i = 0; i < path.length; i++) {
      node = (node.properties && node.properties[path[i]]) || {};
    }
    return node;
  }

  function jsonOr(raw) {
    try { return JSON.parse(raw); } catch (e) { return raw; } // the server names what is wrong with it
  }

  // The text of one input as its schema's JSON type, as the page's form_parse reads it (schema_forms.py).
  function typed(schema, raw, el) {
    var type = typeOf(schema);
    if (el && el.type === "datetime-local") {
      var text = raw.trim();
      if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(text)) text += ":00";
      return /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : text + "Z";
    }
    if (Array.isArray(schema.enum) && type !== "string") return jsonOr(raw);
    if (type === "integer" || type === "number") {
      var n = Number(raw.trim());
      return raw.trim() !== "" && isFinite(n) ? n : raw;
    }
    if (type === "boolean") return raw === "true" || raw === "on";
    if (type === "array") {
      var items = typeOf(schema.items || {});
      if (items === "string") return raw.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
      if (items === "integer" || items === "number") {
        return raw.split(",").filter(function (s) { return s.trim(); }).map(function (s) { return typed(schema.items, s); });
      }
      return jsonOr(raw);
    }
    if (type === "string") return raw;
    return jsonOr(raw);
  }

  function setAt(target, path, value) {
    var node = target;
    for (var i = 0; i < path.length - 1; i++) {
      if (typeof node[path[i]] !== "object" || node[path[i]] === null) node[path[i]] = {};
      node = node[path[i]];
    }
    node[path[path.length - 1]] = value;
  }

  // A form's fields as the params of its route: empty inputs are left out (the route says what is required).
  function paramsOf(form, schema, prefix) {
    var params = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name.charAt(0) === "_" || el.name === "csrfmiddlewaretoken" || el.disabled || el.type === "submit" || el.type === "search") return;
      if (prefix && el.name.indexOf(prefix) !== 0) return;
      var path = el.name.slice(prefix.length).split(".");
      var prop = schemaAt(schema, path);
      var value;
      if (el.type === "checkbox") {
        value = el.checked;
      } else if (el.multiple) {
        value = Array.prototype.map.call(el.selectedOptions, function (o) { return o.value; }).filter(Boolean)
          .map(function (v) { return typed(prop.items || {}, v); });
        if (!value.length) return;
      } else {
        if (el.value.trim() === "") return;
        value = typed(prop, el.value, el);
      }
      setAt(params, path, value);
    });
    return params;
  }

  function notice(place, kind, title, lines) {
    var card = place && document.getElementById(place);
    if (!card) card = root.querySelector(".card");
    if (!card) return;
    var box = document.createElement("div");
    box.className = "notice notice-" + kind;
    box.setAttribute("role", kind === "error" ? "alert" : "status");
    box.tabIndex = -1;
    var head = document.createElement("p");
    head.className = "notice-title";
    head.textContent = (kind === "done" ? "\u2713 " : "") + title;
    box.appendChild(head);
    (lines || []).forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      box.appendChild(p);
    });
    var heading = card.querySelector("h3, h4");
    if (heading && heading.nextSibling) card.insertBefore(box, heading.nextSibling); else card.appendChild(box);
    box.focus({ preventScroll: false });
  }

  function problems(error) {
    return (error.errors || []).map(function (e) { return typeof e === "object" && e && e.message ? (e.path ? e.path.replace(/^\$\.?/, "") + ": " : "") + e.message : String(e); });
  }

  function clearErrors(form) {
    form.querySelectorAll(".inline-field-errors").forEach(function (ul) { ul.remove(); });
    form.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
  }

  // An input error whose path names one of the form's fields ("$.amount") is shown under that field.
  function fieldError(form, error) {
    if (!error || typeof error !== "object" || typeof error.path !== "string") return false;
    var name = error.path.replace(/^\$\.?/, "");
    var field = name && Array.prototype.find.call(form.elements, function (el) { return el.name === name; });
    if (!field) return false;
    var list = document.createElement("ul");
    list.className = "field-errors inline-field-errors";
    var item = document.createElement("li");
    item.textContent = error.message;
    list.appendChild(item);
    field.setAttribute("aria-invalid", "true");
    field.insertAdjacentElement("afterend", list);
    return true;
  }

  function openApp(view, params) {
    var args = { app_id: state.appId };
    if (view) { args.view = view; args.params = params || {}; }
    return app.callServerTool({ name: "open_app", arguments: args }).then(show);
  }

  function busy(form, on) {
    Array.prototype.forEach.call(form.querySelectorAll("button"), function (b) { b.disabled = on; });
  }

  // A form is sent from its button's click or Enter in one of its inputs, never submitted: a host's sandbox may
  // lack allow-forms (then no submit event fires at all), and nothing may post to Charming anyway.
  function send(form) {
    if (!state.appId || !form.reportValidity()) return;
    var match = /\/run\/([^/]+)\/$/.exec(form.getAttribute("action") || "");
    var op = form.dataset.op || (match && decodeURIComponent(match[1]));
    if (op && state.routes[op] && state.routes[op].kind === "mutation") {
      var placeInput = form.querySelector("input[name=_place]");
      var place = placeInput ? placeInput.value : "action-" + op;
      var rowInput = form.querySelector("input[name=_row]");
      var row = rowInput && rowInput.value ? " (\u201c" + rowInput.value + "\u201d)" : "";
      var title = state.routes[op].title || op;
      var params = paramsOf(form, state.routes[op].input, "");
      busy(form, true);
      app.callServerTool({ name: "mutate_app", arguments: { app_id: state.appId, op: op, params: params } })
        .then(function (result) {
          var sc = result.structuredContent || {};
          if (!sc.ok) {
            // Nothing was written: the form keeps what the person typed, the error beside the field it names.
            busy(form, false);
            clearErrors(form);
            var error = sc.error || { message: textOf(result) };
            var unplaced = (error.errors || []).filter(function (e) { return !fieldError(form, e); });
            notice(place, "error", title + row + " did not go through.", [error.message].concat(problems({ errors: unplaced })));
            return;
          }
          return openApp(state.view, state.params).then(function () {
            notice(place, "done", title + ": done" + row + ".");
          });
        })
        .catch(function (error) { busy(form, false); notice(place, "error", title + " did not go through.", [String(error && error.message || error)]); });
      return;
    }
    var card = form.closest("article.view");
    var view = card && card.id.indexOf("view-") === 0 ? card.id.slice(5) : null;
    if (view && state.routes[view]) {
      var filters = paramsOf(form, state.routes[view].input, view + ".");
      busy(form, true);
      openApp(view, filters).then(function () {
        var shown = document.getElementById("view-" + view);
        if (shown) shown.scrollIntoView({ block: "nearest" });
      }).catch(function (error) { busy(form, false); notice("view-" + view, "error", "The view could not be shown.", [String(error && error.message || error)]); });
    }
  }

  root.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button");
    if (!button || !button.form || button.type !== "submit") return;
    event.preventDefault();
    send(button.form);
  }, true);
  root.addEventListener("keydown", function (event) {
    var el = event.target;
    if (event.key === "Enter" && el.dataset && el.dataset.view && el.tagName === "A") { event.preventDefault(); followLink(el); return; }
    if (event.key !== "Enter" || !el.form || el.tagName !== "INPUT" || el.type === "search") return;
    event.preventDefault();
    send(el.form);
  }, true);
  root.addEventListener("submit", function (event) { event.preventDefault(); send(event.target); }, true);

  function followLink(link) {
    var view = link.dataset.view;
    openApp(view, JSON.parse(link.dataset.params || "{}")).then(function () {
      var shown = document.getElementById("view-" + view);
      if (shown) shown.scrollIntoView({ block: "nearest" });
    });
  }
  root.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a");
    if (!link || link.getAttribute("href")) return;
    event.preventDefault();
    if (link.dataset.view) followLink(link);
  });

  function follow(context) {
    if (!context) return;
    if (context.theme) {
      sdk.applyDocumentTheme(context.theme);
      document.documentElement.dataset.theme = context.theme;
    }
    if (context.styles && context.styles.variables) sdk.applyHostStyleVariables(context.styles.variables);
    var size = context.containerDimensions || {};
    var width = size.width || size.maxWidth;
    if (width) document.documentElement.classList.toggle("narrow", width < 640);
    if (context.displayMode) document.documentElement.dataset.display = context.displayMode;
  }

  app.ontoolinput = function (params) {
    var args = (params && params.arguments) || {};
    if (args.app_id && !state.appId) say("Opening the app\u2026");
  };
  app.ontoolresult = function (result) { show(result); };
  app.onhostcontextchanged = follow;
  app.connect().then(function () { follow(app.getHostContext()); }).catch(function (error) {
    say("This view needs a chat host that shows MCP Apps (" + String(error && error.message || error) + ").", "error");
  });
})();
