/*
 * Airlock upload page: the reference client of the API (what a mobile app does).
 *
 * For each picked file: POST /api/v1/uploads (intent) → PUT or multipart POST to
 * upload.url with XMLHttpRequest (progress) — or, when the intent is an S3
 * multipart plan (upload.parts), PUT each part in turn with its own progress,
 * retrying a failed part (re-signing its URL through POST /uploads/{id}/parts
 * when storage refuses it), then POST /uploads/{id}/complete with the ETags —
 * → follow it to ready/rejected/failed → show the thumbnail, or a video's poster
 * with its duration (fetched with the session cookie, shown as a blob: URL). One request follows every file being
 * processed: GET /api/v1/attachments?ids=a,b,c&wait=10 answers when any of them
 * changes, never one waiting request per file (that would meet the server's
 * per-user cap of waiters, and the browser's six connections per host). Retry makes a new intent for that one file,
 * remove discards it, a heartbeat keeps staged uploads alive while the page is
 * open, and Commit binds the remaining ones to a ref in one call.
 *
 * Files over the tus threshold (8 MiB; `?tus=<bytes>` changes it, 0 turns it off) go
 * through the tus endpoint instead (POST /api/v1/tus/, then 5 MiB PATCHes) with the
 * vendored tus-js-client: a dropped connection is retried with a HEAD for the
 * server's offset and the upload carries on from there; its URL is remembered in
 * localStorage, so picking the same file again after a reload resumes it too.
 * Where the intent would be an S3 multipart plan (storage is S3 and the file is over
 * its multipart threshold), the page sends the parts straight to the bucket instead.
 *
 * Everything from the server or the user is put in the page with textContent
 * or setAttribute on fixed attribute names, never with innerHTML.
 */
(function () {
  "use strict";

  var API = "/api/v1";
  var TERMINAL = { ready: true, rejected: true, failed: true };
  var params = new URLSearchParams(window.location.search);
  var HEARTBEAT_MS = Math.max(1, Number(params.get("heartbeat")) || 60) * 1000;
  var tusParam = params.get("tus");
  var TUS_THRESHOLD = tusParam === null ? 8 * 1024 * 1024 : Number(tusParam) || Infinity;
  var TUS_CHUNK = 5 * 1024 * 1024;
  var DIRECT_MULTIPART = Number(document.querySelector('meta[name="airlock-direct-multipart"]')
    .getAttribute("content")) || Infinity;
  var csrfToken = document.querySelector('meta[name="csrf-token"]').getAttribute("content");

  var items = [];
  var nextKey = 1;
  var profiles = {};
  var els = {};

  // --- small helpers ----------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function formatBytes(n) {
    if (n === null || n === undefined) return "";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KB";
    return (n / 1024 / 1024).toFixed(1) + " MB";
  }

  /* 0:07, 12:05, 1:02:03: a video's or a song's length to the nearest second (1.98 s of AAC is 0:02). */
  function formatDuration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
    var whole = Math.round(seconds);
    var h = Math.floor(whole / 3600), m = Math.floor((whole % 3600) / 60), s = whole % 60;
    var mm = h ? String(m).padStart(2, "0") : String(m);
    return (h ? h + ":" : "") + mm + ":" + String(s).padStart(2, "0");
  }

  function dimensions(metadata) {
    if (!metadata) return "";
    if (metadata.width && metadata.height) return metadata.width + "×" + metadata.height;
    if (metadata.page_count) return metadata.page_count + (metadata.page_count === 1 ? " page" : " pages");
    if (metadata.entries !== undefined && metadata.entries !== null) return metadata.entries + " entries";
    return "";
  }

  function errorText(body, status) {
    if (body && body.error) {
      return body.error.code + (body.error.message ? ": " + body.error.message : "");
    }
    return "HTTP " + status;
  }

  function ApiError(status, body) {
    this.status = status;
    this.body = body;
    this.message = errorText(body, status);
  }

  /* JSON request to our own API with the session cookie (+ CSRF header on writes): {body, headers}. */
  function request(method, path, payload) {
    var options = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") {
      options.headers["X-CSRFToken"] = csrfToken;
    }
    if (payload !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(payload);
    }
    return fetch(API + path, options).then(function (response) {
      if (response.status === 204) return { body: null, headers: response.headers };
      return response.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!response.ok) throw new ApiError(response.status, body);
        return { body: body, headers: response.headers };
      });
    });
  }

  function api(method, path, payload) {
    return request(method, path, payload).then(function (answer) { return answer.body; });
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  function showPageError(message) {
    els.pageError.textContent = message;
    els.pageError.hidden = !message;
  }

  // --- one row per file -------------------------------------------------------

  function createItem(file, profile) {
    var item = {
      key: nextKey++, file: file, profile: profile, id: null, status: "new", reason: null, following: false,
      xhr: null, tus: null, resumes: 0, removed: false, committedRef: null, generation: 0, thumbUrl: null,
    };
    var li = el("li", "item");
    li.dataset.key = String(item.key);
    li.dataset.filename = file.name;
    var thumb = el("div", "thumb", (file.name.split(".").pop() || "file").slice(0, 5));
    var body = el("div", "body");
    var name = el("div", "name", file.name);
    var meta = el("div", "meta", formatBytes(file.size) + " · " + profile);
    var line = el("div", "line");
    var status = el("span", "status");
    var detail = el("span", "meta");
    line.appendChild(status);
    line.appendChild(detail);
    var reason = el("div", "reason");
    reason.hidden = true;
    var progress = el("progress");
    progress.max = 100;
    progress.value = 0;
    body.appendChild(name);
    body.appendChild(meta);
    body.appendChild(line);
    body.appendChild(reason);
    body.appendChild(progress);
    var actions = el("div", "actions");
    var retry = el("button", "button small retry", "Retry");
    retry.type = "button";
    retry.hidden = true;
    var remove = el("button", "button small remove", "Remove");
    remove.type = "button";
    actions.appendChild(retry);
    actions.appendChild(remove);
    li.appendChild(thumb);
    li.appendChild(body);
    li.appendChild(actions);
    item.ui = { li: li, thumb: thumb, status: status, detail: detail, reason: reason, progress: progress,
                retry: retry, remove: remove };
    retry.addEventListener("click", function () { retryItem(item); });
    remove.addEventListener("click", function () { removeItem(item); });
    els.items.appendChild(li);
    items.push(item);
    return item;
  }

  function setStatus(item, status, detail, reason) {
    item.status = status;
    item.reason = reason || null;
    var ui = item.ui;
    ui.li.dataset.status = status;
    if (item.id) ui.li.dataset.id = item.id;
    ui.status.dataset.status = status;
    ui.status.textContent = status;
    ui.detail.textContent = detail || "";
    ui.reason.textContent = reason || "";
    ui.reason.hidden = !reason;
    var canRetry = status === "error" || status === "failed";
    ui.retry.hidden = !canRetry;
    ui.remove.hidden = status === "committed";
    ui.progress.hidden = !(status === "uploading" || status === "intent");
    if (ui.parts) ui.parts.hidden = status !== "uploading";
    refreshCommitButton();
  }

  function committable(item) {
    return !item.removed && item.id && item.committedRef === null &&
      (item.status === "pending" || item.status === "processing" || item.status === "ready");
  }

  function refreshCommitButton() {
    var n = items.filter(committable).length;
    els.commit.disabled = n === 0;
    els.commit.textContent = n ? "Commit " + n + (n === 1 ? " file" : " files") : "Commit";
    els.empty.hidden = items.some(function (i) { return !i.removed; });
  }

  // --- the flow ----------------------------------------------------------------

  function contentTypeOf(file) {
    return file.type || "application/octet-stream";
  }

  /* Send the bytes exactly as the intent instructs: PUT the raw body, or POST a form. */
  function sendBytes(item, upload) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      item.xhr = xhr;
      xhr.open(upload.method, upload.url, true);
      var body;
      if (upload.method === "POST") {
        body = new FormData();
        Object.keys(upload.fields || {}).forEach(function (name) { body.append(name, upload.fields[name]); });
        body.append("file", item.file);  // the file goes last
      } else {
        Object.keys(upload.headers || {}).forEach(function (name) { xhr.setRequestHeader(name, upload.headers[name]); });
        body = item.file;
      }
      xhr.upload.addEventListener("progress", function (event) {
        if (event.lengthComputable) {
          item.ui.progress.value = Math.round((event.loaded / event.total) * 100);
          item.ui.detail.textContent = formatBytes(event.loaded) + " of " + formatBytes(event.total);
        }
      });
      xhr.addEventListener("load", function () {
        item.xhr = null;
        if (xhr.status >= 200 && xhr.status < 300) {
          item.ui.progress.value = 100;
          resolve();
        } else {
          var parsed = null;
          try { parsed = JSON.parse(xhr.responseText); } catch (e) { parsed = null; }
          reject(new ApiError(xhr.status, parsed));
        }
      });
      xhr.addEventListener("error", function () { item.xhr = null; reject(new Error("upload failed (network error)")); });
      xhr.addEventListener("abort", function () { item.xhr = null; reject(new Error("upload cancelled")); });
      xhr.send(body);
    });
  }

  // --- multipart (S3, large files) ----------------------------------------------

  var PART_ATTEMPTS = 4;

  function PartError(status, message) {
    this.status = status;
    this.message = message;
  }

  /* One part's bytes to its presigned URL; resolves with the ETag S3 answered. */
  function putPart(item, url, blob, onProgress) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      item.xhr = xhr;
      xhr.open("PUT", url, true);
      xhr.upload.addEventListener("progress", function (event) {
        if (event.lengthComputable) onProgress(event.loaded);
      });
      xhr.addEventListener("load", function () {
        item.xhr = null;
        if (xhr.status < 200 || xhr.status >= 300) return reject(new PartError(xhr.status, "HTTP " + xhr.status));
        var etag = xhr.getResponseHeader("ETag");
        // Without ETag the parts cannot be assembled: the bucket's CORS must expose it.
        if (!etag) return reject(new PartError(0, "storage sent no ETag (CORS ExposeHeaders: ETag)"));
        resolve(etag);
      });
      xhr.addEventListener("error", function () { item.xhr = null; reject(new PartError(0, "network error")); });
      xhr.addEventListener("abort", function () { item.xhr = null; reject(new Error("upload cancelled")); });
      xhr.send(blob);
    });
  }

  function partsUi(item, parts) {
    if (item.ui.parts) item.ui.parts.remove();
    var list = el("ol", "parts");
    var rows = {};
    parts.forEach(function (part) {
      var li = el("li", "part");
      li.dataset.part = String(part.part_number);
      li.dataset.state = "queued";
      li.dataset.attempts = "0";
      var bar = el("progress");
      bar.max = 100;
      bar.value = 0;
      li.appendChild(el("span", "meta", "part " + part.part_number));
      li.appendChild(bar);
      list.appendChild(li);
      rows[part.part_number] = { li: li, bar: bar };
    });
    item.ui.progress.parentNode.appendChild(list);
    item.ui.parts = list;
    return rows;
  }

  /* PUT every part (one at a time), retry a failed one, then assemble. */
  function sendParts(item, intent, current) {
    var upload = intent.upload;
    var size = upload.part_size;
    var file = item.file;
    var urls = {};
    var etags = {};
    var loaded = {};
    upload.parts.forEach(function (part) { urls[part.part_number] = part.url; });
    var rows = partsUi(item, upload.parts);

    function showOverall() {
      var sent = Object.keys(loaded).reduce(function (sum, n) { return sum + loaded[n]; }, 0);
      item.ui.progress.value = Math.round((sent / file.size) * 100);
      item.ui.detail.textContent = formatBytes(sent) + " of " + formatBytes(file.size) + " in " +
        upload.parts.length + " parts";
    }

    function resign() {
      return api("POST", "/uploads/" + intent.id + "/parts").then(function (plan) {
        plan.parts.forEach(function (part) { urls[part.part_number] = part.url; });
      });
    }

    function send(number, attempt) {
      var start = (number - 1) * size;
      var blob = file.slice(start, Math.min(start + size, file.size));
      var row = rows[number];
      row.li.dataset.state = "uploading";
      row.li.dataset.attempts = String(attempt);
      return putPart(item, urls[number], blob, function (n) {
        loaded[number] = n;
        row.bar.value = Math.round((n / blob.size) * 100);
        showOverall();
      }).then(function (etag) {
        etags[number] = etag;
        loaded[number] = blob.size;
        row.bar.value = 100;
        row.li.dataset.state = "done";
        showOverall();
      }, function (error) {
        if (!(error instanceof PartError) || attempt >= PART_ATTEMPTS || !current()) throw error;
        loaded[number] = 0;
        row.bar.value = 0;
        row.li.dataset.state = "retrying";
        // A refused URL (expired: 403) gets new ones; a dropped connection is sent again as is.
        var ready = error.status === 403 ? resign() : Promise.resolve();
        return ready.then(function () { return sleep(300 * attempt); })
          .then(function () { return send(number, attempt + 1); });
      });
    }

    return upload.parts.reduce(function (chain, part) {
      return chain.then(function () { return current() ? send(part.part_number, 1) : null; });
    }, Promise.resolve()).then(function () {
      if (!current()) return null;
      var parts = upload.parts.map(function (part) {
        return { part_number: part.part_number, etag: etags[part.part_number] };
      });
      return api("POST", "/uploads/" + intent.id + "/complete", { parts: parts });
    });
  }

  function sameOrigin(url) {
    try { return new URL(url, window.location.href).origin === window.location.origin; } catch (e) { return false; }
  }

  // --- tus (large files, resumable) ----------------------------------------------

  function tusStatus(error) {
    var response = error && error.originalResponse;
    return response ? response.getStatus() : 0;
  }

  /* Upload through tus: creation makes the intent; PATCHes of TUS_CHUNK bytes; retried from HEAD's offset. */
  function sendTus(item, current) {
    return new Promise(function (resolve, reject) {
      var upload = new window.tus.Upload(item.file, {
        endpoint: API + "/tus/",
        chunkSize: TUS_CHUNK,
        retryDelays: [0, 1000, 3000, 5000, 10000, 20000],
        headers: { "X-CSRFToken": csrfToken },
        metadata: { profile: item.profile, filename: item.file.name, content_type: contentTypeOf(item.file) },
        removeFingerprintOnSuccess: true,
        onUploadUrlAvailable: function () {
          item.id = upload.url.split("/").pop();
          item.ui.li.dataset.id = item.id;
        },
        onProgress: function (sent, total) {
          if (!current()) return;
          item.ui.progress.value = total ? Math.round((sent / total) * 100) : 100;
          item.ui.detail.textContent = formatBytes(sent) + " of " + formatBytes(total) +
            (item.resumes ? " (resumed " + item.resumes + "×)" : "");
        },
        onShouldRetry: function (error) {
          var status = tusStatus(error);
          if (!current()) return false;
          // The library's rule: network trouble, 5xx, 409 (offset moved) and 423 (locked) are retried.
          var retry = status === 0 || status >= 500 || status === 409 || status === 423;
          if (retry) {
            item.resumes = (item.resumes || 0) + 1;
            item.ui.li.dataset.resumes = String(item.resumes);
            item.ui.detail.textContent = "connection lost, resuming…";
          }
          return retry;
        },
        onSuccess: function () { item.tus = null; resolve(); },
        onError: function (error) {
          item.tus = null;
          var status = tusStatus(error);
          var body = null;
          try { body = JSON.parse(error.originalResponse.getBody()); } catch (e) { body = null; }
          reject(status ? new ApiError(status, body) : error);
        },
      });
      item.tus = upload;
      upload.findPreviousUploads().then(function (previous) {
        if (!current()) return;
        if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
        upload.start();
      }, reject);
    });
  }

  function start(item) {
    var generation = ++item.generation;
    item.following = false;
    var current = function () { return !item.removed && generation === item.generation; };
    item.ui.progress.value = 0;
    if (window.tus && window.tus.isSupported && item.file.size > TUS_THRESHOLD &&
        item.file.size <= DIRECT_MULTIPART) {
      setStatus(item, "uploading", "resumable upload (tus)");
      item.ui.li.dataset.via = "tus";
      return settle(item, current, sendTus(item, current));
    }
    setStatus(item, "intent", "asking for an upload URL…");
    return settle(item, current, api("POST", "/uploads", {
      profile: item.profile, filename: item.file.name, size: item.file.size, content_type: contentTypeOf(item.file),
    }).then(function (intent) {
      item.id = intent.id;
      if (!current()) { discardQuietly(intent.id); return null; }
      setStatus(item, "uploading", "0 B of " + formatBytes(item.file.size));
      if (intent.upload.parts && intent.upload.parts.length) return sendParts(item, intent, current);
      return sendBytes(item, intent.upload).then(function () {
        // Storage we do not serve ourselves may not notify us: tell the server the bytes are there.
        if (!sameOrigin(intent.upload.url)) return api("POST", "/uploads/" + intent.id + "/complete", {});
        return null;
      });
    }));
  }

  // Once the bytes are sent (or sending failed): follow it to the outcome, or show the error.
  function settle(item, current, sent) {
    return sent.then(function () {
      if (!current()) return;
      setStatus(item, "pending", "uploaded, waiting for processing");
      follow(item);
    }).catch(function (error) {
      if (!current()) return;
      setStatus(item, "error", "", error.message || String(error));
    });
  }

  // --- following: one request for every file being processed -------------------

  var MAX_FOLLOWED = 100;  // the list's bound on ids
  var following = false;

  function followed(item) {
    return item.following && !item.removed && item.id;
  }

  function follow(item) {
    item.following = true;
    if (following) return;  // the round in flight is short while uploads go on: it joins the next one
    following = true;
    followRound();
  }

  function uploading() {
    return items.some(function (i) { return !i.removed && (i.status === "intent" || i.status === "uploading"); });
  }

  /* One GET for every followed file; it answers when any of them changes. Then again, until none is left. */
  function followRound() {
    var watched = items.filter(followed).slice(0, MAX_FOLLOWED).map(function (item) {
      return { item: item, id: item.id };
    });
    if (!watched.length) { following = false; return; }
    // While other files are still being sent, newly sent ones join at the next round: keep rounds short.
    var wait = uploading() ? 2 : 10;
    var ids = watched.map(function (w) { return w.id; }).join(",");
    request("GET", "/attachments?ids=" + ids + "&wait=" + wait).then(function (answer) {
      var byId = {};
      answer.body.results.forEach(function (resource) { byId[resource.id] = resource; });
      watched.forEach(function (w) {
        var item = w.item;
        if (!followed(item) || item.id !== w.id) return;  // removed or retried meanwhile
        var resource = byId[w.id];
        if (!resource) {
          item.following = false;
          setStatus(item, "error", "", "This upload no longer exists (expired or discarded).");
          return;
        }
        show(item, resource);
        if (TERMINAL[resource.status]) item.following = false;
      });
      // The server did not hold the request (too many waiting): do not ask again at once.
      var skipped = (answer.headers.get("Airlock-Wait") || "").indexOf("skipped") === 0;
      return skipped ? sleep(1000) : null;
    }).catch(function () {
      watched.forEach(function (w) {
        if (followed(w.item)) w.item.ui.detail.textContent = "connection trouble, retrying…";
      });
      return sleep(2000);
    }).then(followRound);
  }

  function show(item, resource) {
    var reason = resource.reason ? resource.reason.code + (resource.reason.message ? ": " + resource.reason.message : "") : null;
    var detail = {
      pending: "waiting for a worker", processing: "being scanned and processed",
      ready: [resource.content_type, dimensions(resource.metadata),
              formatDuration(resource.metadata && resource.metadata.duration_seconds)].filter(Boolean).join(" · "),
      rejected: "refused", failed: "the service had trouble; retry",
    }[resource.status] || "";
    setStatus(item, resource.status, detail, reason);
    if (resource.status !== "ready" || !resource.links) return;
    // A video shows its poster (the frame players show before playing) and its length.
    var duration = formatDuration(resource.metadata && resource.metadata.duration_seconds);
    if (resource.links.poster) {
      loadPreview(item, resource.links.poster, "poster", duration);
    } else if (resource.links.thumbnail) {
      loadPreview(item, resource.links.thumbnail, "thumbnail", "");
    }
  }

  /* Previews need the session cookie: fetch it and show it as a blob: URL. */
  function loadPreview(item, url, kind, duration) {
    fetch(url, { credentials: "same-origin" }).then(function (response) {
      if (!response.ok) throw new Error(kind + " " + response.status);
      return response.blob();
    }).then(function (blob) {
      if (item.removed) return;
      if (item.thumbUrl) URL.revokeObjectURL(item.thumbUrl);
      item.thumbUrl = URL.createObjectURL(blob);
      var img = el("img");
      img.alt = kind + " of " + item.file.name;
      img.dataset.kind = kind;
      img.src = item.thumbUrl;
      item.ui.thumb.textContent = "";
      item.ui.thumb.appendChild(img);
      if (duration) item.ui.thumb.appendChild(el("span", "duration", duration));
    }).catch(function () { /* a missing preview is not an error worth showing */ });
  }

  function discardQuietly(id) {
    return api("POST", "/attachments/" + id + "/discard", {}).catch(function () { return null; });
  }

  function retryItem(item) {
    var previous = item.id;
    item.id = null;
    if (previous) discardQuietly(previous);  // the failed one is of no use any more
    start(item);
  }

  function removeItem(item) {
    item.removed = true;
    item.generation++;
    if (item.xhr) item.xhr.abort();
    if (item.tus) { item.tus.abort(false); item.tus = null; }  // the discard below ends the upload
    var done = item.id ? api("POST", "/attachments/" + item.id + "/discard", {}) : Promise.resolve(null);
    done.then(function () {
      item.ui.li.remove();
      if (item.thumbUrl) URL.revokeObjectURL(item.thumbUrl);
      refreshCommitButton();
    }, function (error) {
      item.removed = false;
      item.ui.reason.textContent = "Could not remove: " + error.message;
      item.ui.reason.hidden = false;
      refreshCommitButton();
    });
  }

  function commit() {
    var chosen = items.filter(committable);
    var ref = els.ref.value.trim();
    if (!chosen.length || !ref) return;
    els.commit.disabled = true;
    els.commitResult.textContent = "committing…";
    api("POST", "/attachments/commit", { ids: chosen.map(function (i) { return i.id; }), ref: ref })
      .then(function (result) {
        chosen.forEach(function (item) {
          item.committedRef = result.ref;
          setStatus(item, "committed", "attached to " + result.ref + " (was " + item.status + ")");
        });
        els.commitResult.textContent = "Committed " + result.committed.length + " to " + result.ref + ".";
        refreshCommitButton();
      }, function (error) {
        var details = (error.body && error.body.error && error.body.error.details) || {};
        chosen.forEach(function (item) {
          if (details[item.id]) {
            item.ui.reason.textContent = "not committed: " + details[item.id];
            item.ui.reason.hidden = false;
          }
        });
        els.commitResult.textContent = "Nothing committed — " + error.message;
        refreshCommitButton();
      });
  }

  function heartbeat() {
    var ids = items.filter(function (i) { return !i.removed && i.id && i.committedRef === null && i.status !== "error"; })
      .map(function (i) { return i.id; });
    if (!ids.length) return Promise.resolve(null);
    return api("POST", "/attachments/heartbeat", { ids: ids }).then(function (result) {
      var until = result.attachments.map(function (a) { return a.expires_at; }).filter(Boolean).sort()[0];
      els.heartbeat.dataset.count = String(result.attachments.length);
      els.heartbeat.textContent = "Heartbeat " + new Date().toLocaleTimeString() + ": " +
        result.attachments.length + " upload(s) kept" + (until ? " until at least " + new Date(until).toLocaleString() : "") + ".";
      return result;
    }, function (error) {
      els.heartbeat.textContent = "Heartbeat failed: " + error.message;
    });
  }

  function onFiles() {
    var profile = els.profile.value;
    Array.prototype.forEach.call(els.files.files, function (file) { start(createItem(file, profile)); });
    els.files.value = "";
  }

  function loadProfiles() {
    return api("GET", "/profiles").then(function (body) {
      els.profile.textContent = "";
      body.profiles.forEach(function (p) {
        profiles[p.name] = p;
        var option = el("option", null, p.name);
        option.value = p.name;
        els.profile.appendChild(option);
      });
      if (profiles.image) els.profile.value = "image";
      els.profile.disabled = false;
      onProfile();
    }, function (error) {
      showPageError("Could not load the upload profiles: " + error.message);
    });
  }

  function onProfile() {
    var p = profiles[els.profile.value];
    if (!p) return;
    els.files.setAttribute("accept", p.allowed_types.join(","));
    els.hint.textContent = p.allowed_types.join(", ") + " · up to " + formatBytes(p.max_bytes);
  }

  document.addEventListener("DOMContentLoaded", function () {
    ["profile", "files", "items", "empty", "ref", "commit", "heartbeat"].forEach(function (id) {
      els[id] = document.getElementById(id);
    });
    els.hint = document.getElementById("profile-hint");
    els.pageError = document.getElementById("page-error");
    els.commitResult = document.getElementById("commit-result");
    els.files.addEventListener("change", onFiles);
    els.profile.addEventListener("change", onProfile);
    els.commit.addEventListener("click", commit);
    loadProfiles();
    refreshCommitButton();
    setInterval(heartbeat, HEARTBEAT_MS);
    // For tests and curious developers: the page's state, read-only use.
    window.airlock = { items: items, heartbeat: heartbeat };
  });
})();
