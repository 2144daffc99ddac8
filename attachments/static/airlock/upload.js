/*
 * Airlock upload page: Uppy (vendored, vendor/uppy) sends the bytes; this file wires it to Airlock's
 * API and shows what Airlock made of each file.
 *
 * Transport, by storage (the page's <meta> tags say which):
 * - local storage: Uppy's Tus plugin to POST /api/v1/tus/ in 5 MiB PATCHes (a dropped connection is
 *   resumed from the server's offset, HEAD then PATCH);
 * - S3: Uppy's AwsS3 plugin with Airlock's intents: getUploadParameters makes an intent
 *   (POST /api/v1/uploads) and hands Uppy its presigned POST form or PUT; over the multipart
 *   threshold createMultipartUpload makes the intent whose plan has the part URLs, signPart hands
 *   them out (re-signing through POST /uploads/{id}/parts when a part is sent again or the URLs
 *   are near expiry), listParts asks the same endpoint what is already stored (resume), and
 *   completeMultipartUpload assembles with POST /uploads/{id}/complete.
 * Golden Retriever keeps the files (IndexedDB) and the uploads' state (localStorage) across a
 * reload: the page confirms the restore itself and the uploads carry on where they were.
 *
 * Then each file is followed to its outcome, with one waiting request for all of them
 * (GET /api/v1/attachments?ids=a,b,c&wait=…): ready with its thumbnail or a video's poster,
 * length and player (its web rendition once that is made, read again every few seconds until then),
 * rejected with its reason. Retry is offered only where trying again can succeed (a dropped
 * connection, a service in trouble), never after a content decision; remove discards; a heartbeat
 * keeps staged uploads alive while the page is open; Commit binds the rest to a ref in one call.
 *
 * Signed in (`/`), the page speaks as the session's user (cookie + CSRF header). At `/upload#token=…`
 * it speaks with a client token a host minted for one of its people (Authorization: Bearer, no
 * cookie): the token is taken from the fragment, which never reaches a server or a Referer, kept in
 * sessionStorage for reloads, and removed from the address bar. An upload link's page (`/l/<id>`,
 * attachments/links/page.py) is the guest mode: the server puts a client token minted for this device's
 * guest subject in the page; no profile picker, no commit (the files reach the link's ref by
 * themselves), words a guest understands, and Remove asks DELETE /guest-uploads/{id} (within the
 * link's undo window, committed or not).
 *
 * Each file gets a profile from its type, or its name's extension when the browser gives none (photo →
 * image, video or audio → media, PDF → document, ZIP → archive), unless the picker names one (`camera`
 * takes photos and videos alike). Everything from the server or the user is put in the
 * page with textContent or setAttribute on fixed attribute names, never with innerHTML.
 */
(function () {
  "use strict";

  var API = "/api/v1";
  var MIB = 1024 * 1024;
  var TERMINAL = { ready: true, rejected: true, failed: true };
  var RENDITION_POLL_MS = 3000;  // a transcode takes seconds to minutes: no need to ask more often
  // Refusals of the claim itself: sending the same file again is refused the same way.
  var PERMANENT_CODES = {
    TYPE_NOT_ALLOWED: true, TOO_LARGE: true, UNKNOWN_PROFILE: true, VALIDATION_ERROR: true,
    CHECKSUM_MISMATCH: true, QUOTA_EXCEEDED: true, LINK_GONE: true,
  };
  // What a person can do about a refusal, by reason code: the content decisions (rejected) and the
  // refused claims alike. Nothing here is offered as a Retry: the same file is refused the same way.
  var ADVICE = {
    type_not_allowed: "This kind of file is not accepted here: the picker lists the types that are.",
    TYPE_NOT_ALLOWED: "This kind of file is not accepted here: the picker lists the types that are.",
    too_large: "Too large for this page: send a smaller or shorter copy.",
    TOO_LARGE: "Too large for this page: send a smaller or shorter copy.",
    malware: "A virus scanner flagged this file: do not open or share it; send a clean copy.",
    pixel_limit: "The picture has too many pixels: export it smaller and send that.",
    page_limit: "The document has too many pages: split it and send the parts.",
    archive_limit: "The archive unpacks too large or holds too many files: send fewer files per archive.",
    archive_uninspectable: "The archive cannot be checked (a password or an unusual compression): send a plain ZIP.",
    duration_limit: "The recording is too long: trim it and send it again.",
    stream_limit: "The file holds too many tracks: export it again as a plain video.",
    codec_not_allowed: "This video or audio format is not accepted: export it as MP4 (H.264 and AAC).",
    corrupt: "The file is damaged or not what its name says: save or export it again and send that copy.",
    moderator: "A moderator removed this file: ask the organiser if you think that is a mistake.",
    size_mismatch: "The file changed while it was sent: pick it again.",
    checksum_mismatch: "The file changed while it was sent: pick it again.",
    CHECKSUM_MISMATCH: "The file changed while it was sent: pick it again.",
    QUOTA_EXCEEDED: "You have sent as many files as this page takes.",
    LINK_GONE: "This upload page has closed: it no longer takes files.",
  };
  // What a guest reads for each state (guest mode): no internals, no codes.
  var GUEST_WORDS = {
    queued: "Waiting to send", uploading: "Sending", pending: "Sent, being checked", processing: "Sent, being checked",
    ready: "Received", rejected: "Not accepted", failed: "Could not be checked", error: "Not sent",
  };
  // Which profile a file goes to when the picker says "by file type": the first that allows its type.
  var GUEST = document.querySelector('meta[name="airlock-guest"]') !== null &&
    document.querySelector('meta[name="airlock-guest"]').getAttribute("content") === "1";
  var AUTO_PROFILES = GUEST
    ? (document.querySelector('meta[name="airlock-guest-profiles"]').getAttribute("content") || "").split(" ").filter(Boolean)
    : ["image", "media", "document", "archive"];
  var params = new URLSearchParams(window.location.search);
  var HEARTBEAT_MS = Math.max(1, Number(params.get("heartbeat")) || 60) * 1000;
  var TUS_CHUNK = 5 * MIB;

  function metaContent(name) {
    var node = document.querySelector('meta[name="' + name + '"]');
    return node ? node.getAttribute("content") : "";
  }

  var csrfToken = metaContent("csrf-token");
  var clientToken = GUEST ? metaContent("airlock-guest-token")
    : metaContent("airlock-client") === "1" ? takeClientToken() : "";

  function takeClientToken() {
    var found = /(?:^|&)token=([^&]+)/.exec(window.location.hash.slice(1));
    if (found) {
      window.sessionStorage.setItem("airlock-client-token", decodeURIComponent(found[1]));
      window.history.replaceState(null, "", window.location.pathname + window.location.search);
    }
    return window.sessionStorage.getItem("airlock-client-token") || "";
  }

  /* How a request proves who it is: the client token, or the session's CSRF header on writes. */
  function credentialHeaders(headers, write) {
    if (clientToken) headers.Authorization = "Bearer " + clientToken;
    else if (write) headers["X-CSRFToken"] = csrfToken;
    return headers;
  }
  var STORAGE = metaContent("airlock-storage");
  var MULTIPART_OVER = Number(metaContent("airlock-multipart-bytes")) || Infinity;
  var PART_SIZE = Number(metaContent("airlock-part-size")) || 16 * MIB;
  // profile → variant name → long edge in px (AIRLOCK_VARIANTS), for the thumbnails' srcset.
  var VARIANT_EDGES = JSON.parse(metaContent("airlock-variant-edges") || "{}");

  var items = {};  // Uppy file id → item
  var order = [];
  var profiles = {};
  var profileNames = [];
  var els = {};
  var uppy = null;

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
    if (n < MIB) return (n / 1024).toFixed(1) + " KB";
    return (n / MIB).toFixed(1) + " MB";
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

  function ApiError(status, body, retryAfter) {
    var error = body && body.error;
    this.status = status;
    this.retryAfter = retryAfter || null;  // ms the server asked to wait (Retry-After), if it did
    this.body = body;
    this.code = error ? error.code : null;
    this.message = error ? error.code + (error.message ? ": " + error.message : "") : "HTTP " + status;
  }
  ApiError.prototype = Object.create(Error.prototype);

  /* JSON request to our own API as the page's user (credentialHeaders): {body, headers}. */
  function request(method, path, payload, signal) {
    var options = { method: method, credentials: clientToken ? "omit" : "same-origin",
                    headers: credentialHeaders({ Accept: "application/json" }, method !== "GET"), signal: signal };
    if (payload !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(payload);
    }
    return fetch(API + path, options).then(function (response) {
      if (response.status === 204) return { body: null, headers: response.headers };
      return response.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!response.ok) throw new ApiError(response.status, body, retryAfterMs(response.status, response.headers.get("Retry-After")));
        return { body: body, headers: response.headers };
      });
    });
  }

  function api(method, path, payload, signal) {
    return request(method, path, payload, signal).then(function (answer) { return answer.body; });
  }

  /* A 429 or 503's Retry-After in ms (its seconds form, at most 5 minutes); null for any other answer. */
  function retryAfterMs(status, header) {
    if (status !== 429 && status !== 503) return null;
    var seconds = header === null || header === undefined || header === "" ? NaN : Number(header);
    return isFinite(seconds) && seconds >= 0 ? Math.min(seconds, 300) * 1000 : null;
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  function showPageError(message) {
    els.pageError.textContent = message;
    els.pageError.hidden = !message;
  }

  function contentTypeOf(file) {
    return file.type || "application/octet-stream";
  }

  // A browser (or Uppy, from its own table) often gives a phone's file no type or a generic one: the
  // name's extension then picks the profile and lets the picker take it. It is declared as the browser
  // said; Airlock reads the type from the bytes.
  var TYPE_BY_EXTENSION = {
    jpg: "image/jpeg", jpeg: "image/jpeg", png: "image/png", gif: "image/gif", webp: "image/webp",
    heic: "image/heic", heif: "image/heif", hif: "image/heif", avif: "image/avif",
    mp4: "video/mp4", m4v: "video/mp4", mov: "video/quicktime", webm: "video/webm",
    m4a: "audio/mp4", mp3: "audio/mpeg", ogg: "audio/ogg", opus: "audio/ogg", wav: "audio/x-wav",
    pdf: "application/pdf", zip: "application/zip",
  };

  function typeOf(file) {
    if (file.type && file.type !== "application/octet-stream") return file.type;
    var dot = (file.name || "").lastIndexOf(".");
    return dot > 0 ? TYPE_BY_EXTENSION[file.name.slice(dot + 1).toLowerCase()] || "" : "";
  }

  // --- profiles: one per file, from its type ----------------------------------

  function profileFor(file) {
    var chosen = els.profile.value;
    if (chosen && chosen !== "auto") return profiles[chosen] ? chosen : null;
    var type = typeOf(file);
    for (var i = 0; i < AUTO_PROFILES.length; i++) {
      var p = profiles[AUTO_PROFILES[i]];
      if (p && p.allowed_types.indexOf(type) !== -1) return p.name;
    }
    return null;
  }

  function allowedTypes() {
    var chosen = els.profile.value;
    if (chosen && chosen !== "auto") return profiles[chosen] ? profiles[chosen].allowed_types.slice() : [];
    var types = [];
    AUTO_PROFILES.forEach(function (name) {
      if (profiles[name]) types = types.concat(profiles[name].allowed_types);
    });
    return types;
  }

  /* What the picker takes: the types, and the extensions that name them (for files with no type). */
  function pickerRestriction(types) {
    var accepted = types.slice();
    Object.keys(TYPE_BY_EXTENSION).forEach(function (ext) {
      if (types.indexOf(TYPE_BY_EXTENSION[ext]) !== -1) accepted.push("." + ext);
    });
    return accepted;
  }

  function onProfile() {
    var types = allowedTypes();
    if (uppy) uppy.setOptions({ restrictions: { allowedFileTypes: types.length ? pickerRestriction(types) : null } });
    var chosen = els.profile.value;
    els.hint.textContent = chosen === "auto"
      ? "each file goes to the profile for its type: " + AUTO_PROFILES.filter(function (n) { return profiles[n]; }).join(", ")
      : types.join(", ") + " · " + limitsOf(profiles[chosen]);
  }

  /* "up to 25 MB", or, for a profile with kinds, each kind's limit ("photo up to 25 MB, video up to 1 GB"). */
  function limitsOf(profile) {
    if (!profile) return "";
    if (!profile.kinds || !profile.kinds.length) return "up to " + formatBytes(profile.max_bytes);
    return profile.kinds.map(function (kind) { return kind.name + " up to " + formatBytes(kind.max_bytes); }).join(", ");
  }

  function loadProfiles() {
    return api("GET", "/profiles").then(function (body) {
      els.profile.textContent = "";
      var auto = el("option", null, "by file type");
      auto.value = "auto";
      els.profile.appendChild(auto);
      body.profiles.forEach(function (p) {
        profiles[p.name] = p;
        profileNames.push(p.name);
        var option = el("option", null, p.name);
        option.value = p.name;
        els.profile.appendChild(option);
      });
      els.profile.value = "auto";
      els.profile.disabled = false;
      onProfile();
    }, function (error) {
      showPageError("Could not load the upload profiles: " + error.message);
    });
  }

  // --- one row per file: what Airlock made of it ------------------------------

  function createItem(file) {
    var item = {
      fileId: file.id, name: file.name, size: file.size, profile: file.meta.profile, id: null,
      status: "new", retryable: false, following: false, removed: false, committedRef: null,
      thumbUrl: null, resumes: 0, partAttempts: {},
    };
    var li = el("li", "item");
    li.dataset.filename = file.name;
    var thumb = el("div", "thumb", (file.extension || "file").slice(0, 5));
    var body = el("div", "body");
    var line = el("div", "line");
    var status = el("span", "status");
    var detail = el("span", "meta");
    line.appendChild(status);
    line.appendChild(detail);
    var reason = el("div", "reason");
    reason.hidden = true;
    var advice = el("div", "advice");
    advice.hidden = true;
    var progress = el("progress");
    progress.max = 100;
    progress.value = 0;
    body.appendChild(el("div", "name", file.name));
    body.appendChild(el("div", "meta", formatBytes(file.size) + (GUEST ? "" : " · " + file.meta.profile)));
    body.appendChild(line);
    body.appendChild(reason);
    body.appendChild(advice);
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
    item.ui = { li: li, body: body, thumb: thumb, status: status, detail: detail, reason: reason,
                advice: advice, progress: progress, retry: retry, remove: remove };
    retry.addEventListener("click", function () { retryItem(item); });
    remove.addEventListener("click", function () { removeItem(item); });
    els.items.appendChild(li);
    items[file.id] = item;
    order.push(item);
    return item;
  }

  function setId(item, id) {
    item.id = id;
    if (id) item.ui.li.dataset.id = id;
    else delete item.ui.li.dataset.id;
    if (uppy && uppy.getFile(item.fileId)) uppy.setFileMeta(item.fileId, { airlockId: id });
  }

  /* `code`: a refusal's reason code, which says what to do about it (ADVICE). */
  function setStatus(item, status, detail, reason, retryable, code) {
    item.status = status;
    item.retryable = !!retryable;
    var ui = item.ui;
    ui.li.dataset.status = status;
    ui.status.dataset.status = status;
    ui.status.textContent = GUEST ? GUEST_WORDS[status] || status : status;
    ui.detail.textContent = detail || "";
    if (GUEST && code) reason = "";  // the advice says it in a guest's words
    ui.reason.textContent = reason || "";
    ui.reason.hidden = !reason;
    ui.advice.textContent = (!retryable && code && (ADVICE[code] ||
      (GUEST ? "This file could not be accepted: try another one." : ""))) || "";
    ui.advice.hidden = !ui.advice.textContent;
    ui.retry.hidden = !item.retryable;
    ui.remove.hidden = status === "committed";
    ui.progress.hidden = status !== "uploading";
    refreshCommitButton();
  }

  function committable(item) {
    return !item.removed && item.id && item.committedRef === null &&
      (item.status === "pending" || item.status === "processing" || item.status === "ready");
  }

  function liveItems() {
    return order.filter(function (i) { return !i.removed; });
  }

  function refreshCommitButton() {
    var n = order.filter(committable).length;
    els.commit.disabled = n === 0;
    els.commit.textContent = n ? "Commit " + n + (n === 1 ? " file" : " files") : "Commit";
    els.empty.hidden = liveItems().length > 0;
  }

  /* Multipart: one row per part with how often it was sent (a dropped part is sent again). */
  function showPart(item, number, state) {
    if (!item.ui.parts) {
      item.ui.parts = el("ol", "parts");
      item.ui.body.appendChild(item.ui.parts);
    }
    var row = item.ui.parts.querySelector('li[data-part="' + number + '"]');
    if (!row) {
      row = el("li", "part", "part " + number);
      row.dataset.part = String(number);
      var rows = item.ui.parts.children, before = null;
      for (var i = 0; i < rows.length; i++) {
        if (Number(rows[i].dataset.part) > number) { before = rows[i]; break; }
      }
      item.ui.parts.insertBefore(row, before);
    }
    row.dataset.state = state;
    row.dataset.attempts = String(item.partAttempts[number] || 0);
  }

  // --- errors: say what happened and whether trying again can help --------------

  /* The server's answer behind a tus-js-client error: {status, body}, or null when none came. */
  function tusAnswer(error) {
    var response = error && error.originalResponse;
    if (response && response.getStatus()) return { status: response.getStatus(), body: response.getBody() };
    // By the time Uppy reports it the XHR may be reset; tus-js-client's message quotes the answer.
    var quoted = /response code: (\d+), response text: ([\s\S]*), request id:/.exec((error && error.message) || "");
    return quoted && Number(quoted[1]) ? { status: Number(quoted[1]), body: quoted[2] } : null;
  }

  /* {message, retryable} from whatever Uppy reported: our ApiError, a tus error, an XHR to storage. */
  function describe(error) {
    if (error instanceof ApiError) {
      if (error.status === 0) return { message: "network error", retryable: true };
      return { message: error.message, retryable: !PERMANENT_CODES[error.code], code: error.code };
    }
    var answer = tusAnswer(error);
    if (answer) {
      var body = null;
      try { body = JSON.parse(answer.body); } catch (e) { body = null; }
      var apiError = new ApiError(answer.status, body);
      return { message: apiError.message, retryable: !PERMANENT_CODES[apiError.code], code: apiError.code };
    }
    var xhr = error && error.source;  // AwsS3: the request to the bucket
    if (xhr && typeof xhr.status === "number" && xhr.status >= 400) {
      // S3 refused the body itself (its policy, its size): the same bytes are refused again.
      var permanent = xhr.status === 400 || xhr.status === 413;
      return { message: "storage answered HTTP " + xhr.status, retryable: !permanent };
    }
    // No answer at all: the connection dropped (Uppy says "Unknown error" here).
    return { message: "network error (" + ((error && error.message) || "connection lost") + ")", retryable: true };
  }

  // --- Airlock's intents behind Uppy's AwsS3 callbacks ---------------------------

  var plans = {};  // attachment id → {urls: {part number: url}, expires: ms}

  function itemOf(file) {
    return items[file.id] || createItem(file);
  }

  function makeIntent(file, signal) {
    var item = itemOf(file);
    var previous = item.id;
    if (previous) discardQuietly(previous);  // a new attempt: the failed one is of no use any more
    setId(item, null);
    return api("POST", "/uploads", {
      profile: file.meta.profile, filename: file.name, size: file.size, content_type: contentTypeOf(file),
    }, signal).then(function (intent) {
      setId(item, intent.id);
      return intent;
    });
  }

  function keepPlan(id, plan) {
    var entry = plans[id] || (plans[id] = { urls: {}, expires: 0 });
    plan.parts.forEach(function (part) { entry.urls[part.part_number] = part.url; });
    entry.expires = Date.parse(plan.expires_at || plan.upload && plan.upload.expires_at) || 0;
    return entry;
  }

  function resign(id, signal) {
    return api("POST", "/uploads/" + id + "/parts", undefined, signal).then(function (plan) {
      keepPlan(id, plan);
      return plan;
    });
  }

  /*
   * Uppy's own sender waits for the bucket's ETag on every request, but S3-compatible stores need not
   * send one for a presigned POST form (moto does not): without it Uppy's promise never settles. The
   * form POST is sent here instead (same events, same error shape); PUTs and parts stay Uppy's.
   */
  function uploadPartBytes(args) {
    var signature = args.signature;
    if (String(signature.method || "PUT").toUpperCase() !== "POST") return window.Uppy.AwsS3.uploadPartBytes(args);
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      var signal = args.signal;
      function onabort() { xhr.abort(); }
      function cleanup() { if (signal) signal.removeEventListener("abort", onabort); }
      function failed(message) {
        cleanup();
        var error = new Error(message);
        error.source = xhr;
        reject(error);
      }
      if (signal) {
        if (signal.aborted) { reject(new DOMException("Aborted", "AbortError")); return; }
        signal.addEventListener("abort", onabort);
      }
      xhr.open("POST", signature.url, true);
      xhr.responseType = "text";
      xhr.upload.addEventListener("progress", function (event) { args.onProgress(event); });
      xhr.addEventListener("abort", function () { cleanup(); reject(new DOMException("Aborted", "AbortError")); });
      xhr.addEventListener("error", function () { failed("Unknown error"); });
      xhr.addEventListener("load", function () {
        if (xhr.status < 200 || xhr.status >= 300) { failed("Non 2xx"); return; }
        cleanup();
        args.onProgress({ loaded: args.size, lengthComputable: true });
        var etag = xhr.getResponseHeader("ETag") || "";
        if (args.onComplete) args.onComplete(etag);
        resolve({ ETag: etag, location: xhr.getResponseHeader("Location") || undefined });
      });
      xhr.send(args.body);
    });
  }

  var s3Callbacks = {
    uploadPartBytes: uploadPartBytes,
    shouldUseMultipart: function (file) { return file.size > MULTIPART_OVER; },
    getChunkSize: function () { return PART_SIZE; },

    getUploadParameters: function (file, options) {
      return makeIntent(file, options && options.signal).then(function (intent) {
        var upload = intent.upload;
        if (upload.parts && upload.parts.length) {
          discardQuietly(intent.id);
          throw new Error("the server planned a multipart upload for a file under its threshold");
        }
        items[file.id].ui.li.dataset.via = "s3-" + upload.method.toLowerCase();
        return { method: upload.method, url: upload.url, fields: upload.fields || {}, headers: upload.headers || {} };
      });
    },

    createMultipartUpload: function (file) {
      return makeIntent(file).then(function (intent) {
        if (!intent.upload.parts || !intent.upload.parts.length) {
          discardQuietly(intent.id);
          throw new Error("the server planned a single upload for a file over its multipart threshold");
        }
        items[file.id].ui.li.dataset.via = "s3-multipart";
        keepPlan(intent.id, intent.upload);
        return { uploadId: intent.id, key: intent.id };
      });
    },

    signPart: function (file, options) {
      var item = itemOf(file), number = options.partNumber, id = options.uploadId;
      item.partAttempts[number] = (item.partAttempts[number] || 0) + 1;
      showPart(item, number, item.partAttempts[number] > 1 ? "retrying" : "uploading");
      var plan = plans[id];
      // A part sent again may have been refused for an expired URL; after a reload there is no plan.
      var fresh = plan && plan.urls[number] && item.partAttempts[number] === 1 && Date.now() < plan.expires - 30000;
      var ready = fresh ? Promise.resolve() : resign(id, options.signal);
      return ready.then(function () {
        var url = plans[id].urls[number];
        if (!url) throw new Error("no URL for part " + number);
        return { method: "PUT", url: url, headers: {} };
      });
    },

    listParts: function (file, options) {
      return resign(options.uploadId, options.signal).then(function (plan) {
        var item = itemOf(file);
        return plan.uploaded_parts.map(function (part) {
          item.partAttempts[part.part_number] = item.partAttempts[part.part_number] || 1;
          showPart(item, part.part_number, "done");
          return { PartNumber: part.part_number, ETag: part.etag, Size: part.size };
        });
      });
    },

    completeMultipartUpload: function (file, options) {
      var parts = options.parts.map(function (part) { return { part_number: part.PartNumber, etag: part.ETag }; });
      return api("POST", "/uploads/" + options.uploadId + "/complete", { parts: parts }, options.signal)
        .then(function (resource) { return { location: (resource && resource.links && resource.links.self) || "" }; });
    },

    abortMultipartUpload: function (file, options) {
      return discardQuietly(options.uploadId);
    },
  };

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
    return liveItems().some(function (i) { return i.status === "uploading" || i.status === "queued"; });
  }

  /* One GET for every followed file; it answers when any of them changes. Then again, until none is left. */
  function followRound() {
    var watched = order.filter(followed).slice(0, MAX_FOLLOWED).map(function (item) {
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
        if (!followed(item) || item.id !== w.id) return;  // removed or sent again meanwhile
        var resource = byId[w.id];
        if (!resource) {
          item.following = false;
          setStatus(item, "error", "", "This upload no longer exists (expired or discarded).", false);
          return;
        }
        show(item, resource);
        if (TERMINAL[resource.status]) item.following = false;
      });
      // The server did not hold the request (too many waiting): do not ask again at once.
      var skipped = (answer.headers.get("Airlock-Wait") || "").indexOf("skipped") === 0;
      return skipped ? sleep(1000) : null;
    }).catch(function (error) {
      watched.forEach(function (w) {
        if (followed(w.item)) w.item.ui.detail.textContent = "connection trouble, retrying…";
      });
      return sleep(Math.max(2000, (error && error.retryAfter) || 0));
    }).then(followRound);
  }

  function show(item, resource) {
    var reason = resource.reason ? resource.reason.code + (resource.reason.message ? ": " + resource.reason.message : "") : null;
    var detail = GUEST ? {
      ready: [dimensions(resource.metadata), formatDuration(resource.metadata && resource.metadata.duration_seconds)]
        .filter(Boolean).join(" · "),
      failed: "try again",
    }[resource.status] || "" : {
      pending: "waiting for a worker", processing: "being scanned and processed",
      ready: [resource.content_type, dimensions(resource.metadata),
              formatDuration(resource.metadata && resource.metadata.duration_seconds)].filter(Boolean).join(" · "),
      rejected: "refused", failed: "the service had trouble; retry",
    }[resource.status] || "";
    // failed is the infrastructure's trouble: sending the file again can succeed. rejected is a
    // decision about the content: it never can.
    var file = uppy.getFile(item.fileId);
    var canResend = resource.status === "failed" && !!(file && file.data && !file.isGhost);
    setStatus(item, resource.status, detail, reason, canResend,
              resource.status === "rejected" && resource.reason ? resource.reason.code : null);
    if (resource.status !== "ready" || !resource.links) return;
    // A video shows its poster (the frame players show before playing) and its length, and a player.
    var duration = formatDuration(resource.metadata && resource.metadata.duration_seconds);
    if (resource.links.poster) {
      loadPreview(item, resource.links.poster, "poster", duration);
    } else if (resource.links.thumbnail) {
      showThumbnail(item, resource);
    }
    if (isVideo(resource)) {
      showPlayer(item, resource);
      var web = webRendition(resource);
      if (web && web.status === "pending") followRendition(item);
    }
  }

  function isVideo(resource) {
    return !!resource.links.poster || (resource.content_type || "").indexOf("video/") === 0;
  }

  function webRendition(resource) {
    return (resource.renditions || {}).web || null;
  }

  /* A ready video's player: its web rendition once that is ready (what every browser decodes: an HEVC
     clip from an iPhone does not play in Chrome or Firefox as it was sent), else the served copy.
     Links are signed, so <video src> needs no header; Range requests reach a moov at the end. */
  function showPlayer(item, resource) {
    var web = webRendition(resource);
    var kind = web && web.status === "ready" && resource.links.web ? "web" : "download";
    var url = resource.links[kind];
    if (!url) return;
    var player = item.ui.player;
    if (!player) {
      player = el("video", "player");
      player.controls = true;
      player.preload = "metadata";
      player.playsInline = true;
      if (resource.links.poster) player.poster = resource.links.poster;
      item.ui.player = player;
      item.ui.playerNote = el("div", "meta player-note");
      item.ui.body.insertBefore(player, item.ui.progress);
      item.ui.body.insertBefore(item.ui.playerNote, item.ui.progress);
    }
    // The same kind keeps its source (a re-read re-signs the link): switching would stop playback.
    if (player.dataset.source !== kind) {
      player.dataset.source = kind;
      player.src = url;
    }
    item.ui.playerNote.textContent = web && web.status === "pending"
      ? "preparing a version every browser plays… " + Math.round((web.progress || 0) * 100) + "%"
      : "";
  }

  /* A ready video whose web rendition is still being made: read it again now and then (a ready file's
     `?wait=` answers at once, its status being final) until the rendition is ready, failed or not needed. */
  function followRendition(item) {
    if (item.followingRendition) return;
    item.followingRendition = true;
    var id = item.id;
    function round() {
      if (item.removed || item.id !== id) { item.followingRendition = false; return; }
      api("GET", "/attachments?ids=" + id).then(function (page) {
        var resource = page && page.results && page.results[0];
        if (!resource || resource.status !== "ready" || item.removed || item.id !== id) return false;
        showPlayer(item, resource);
        var web = webRendition(resource);
        return !!web && web.status === "pending";
      }, function (error) {
        return !(error.status >= 400 && error.status < 500) || error.status === 429;  // gone: stop asking
      }).then(function (again) {
        if (again) sleep(RENDITION_POLL_MS).then(round);
        else item.followingRendition = false;
      });
    }
    sleep(RENDITION_POLL_MS).then(round);
  }

  /* A thumbnail's links are signed (no header needed): an <img> whose srcset adds the variants, so a
     dense screen takes the smallest one that is sharp in the box. A variant is made on first request. */
  function showThumbnail(item, resource) {
    var img = el("img");
    img.alt = "thumbnail of " + item.name;
    img.dataset.kind = "thumbnail";
    img.addEventListener("error", function () { img.remove(); });  // a missing preview is no error to show
    var srcset = thumbnailSrcset(resource);
    if (srcset) {
      img.srcset = srcset;
      img.sizes = (item.ui.thumb.clientWidth || 72) + "px";
    }
    img.src = resource.links.thumbnail;
    item.ui.thumb.textContent = "";
    item.ui.thumb.appendChild(img);
  }

  /* The thumbnail and each variant with the width it has (fit within its long edge, never upscaled);
     a variant no wider than one before it is left out. "" when there is nothing to add. */
  function thumbnailSrcset(resource) {
    var thumb = (resource.derivatives || {}).thumbnail;
    var shown = (resource.derivatives || {}).display || resource.metadata || {};
    var links = resource.links.variants || {};
    var edges = VARIANT_EDGES[resource.profile] || {};
    if (!thumb || !thumb.width || !shown.width || !shown.height) return "";
    var widest = thumb.width;
    var parts = [resource.links.thumbnail + " " + thumb.width + "w"];
    Object.keys(edges).sort(function (a, b) { return edges[a] - edges[b]; }).forEach(function (name) {
      var width = Math.round(shown.width * Math.min(1, edges[name] / Math.max(shown.width, shown.height)));
      if (!links[name] || width <= widest) return;
      widest = width;
      parts.push(links[name] + " " + width + "w");
    });
    return parts.length > 1 ? parts.join(", ") : "";
  }

  /* A video's poster: fetched and shown as a blob: URL. */
  function loadPreview(item, url, kind, duration) {
    fetch(url, { credentials: clientToken ? "omit" : "same-origin", headers: credentialHeaders({}, false) })
    .then(function (response) {
      if (!response.ok) throw new Error(kind + " " + response.status);
      return response.blob();
    }).then(function (blob) {
      if (item.removed) return;
      if (item.thumbUrl) URL.revokeObjectURL(item.thumbUrl);
      item.thumbUrl = URL.createObjectURL(blob);
      var img = el("img");
      img.alt = kind + " of " + item.name;
      img.dataset.kind = kind;
      img.src = item.thumbUrl;
      item.ui.thumb.textContent = "";
      item.ui.thumb.appendChild(img);
      if (duration) item.ui.thumb.appendChild(el("span", "duration", duration));
    }).catch(function () { /* a missing preview is not an error worth showing */ });
  }

  // --- actions -----------------------------------------------------------------

  function discardQuietly(id) {
    return api("POST", "/attachments/" + id + "/discard", {}).catch(function () { return null; });
  }

  function retryItem(item) {
    var file = uppy.getFile(item.fileId);
    if (!file) return;
    item.ui.retry.hidden = true;
    if (item.status === "error") {
      // The transport failed: Uppy sends it again (tus resumes from the server's offset; S3 makes a new intent).
      setStatus(item, "queued", "sending again…");
      uppy.retryUpload(item.fileId);
      return;
    }
    // Processing failed after the bytes were in: send the file again as a new upload.
    var previous = item.id;
    item.resending = true;
    uppy.removeFile(item.fileId);
    item.resending = false;
    if (previous) discardQuietly(previous);
    setId(item, null);
    item.following = false;
    uppy.addFile({ name: file.name, type: file.type, data: file.data, meta: { profile: item.profile } });
  }

  function removeItem(item) {
    if (uppy.getFile(item.fileId)) uppy.removeFile(item.fileId);  // file-removed discards it
    else forget(item);
  }

  /* The file left Uppy (our Remove, or the Dashboard's): discard it on the server, drop the row. */
  function forget(item) {
    item.removed = true;
    var done = GUEST && item.id
      ? api("DELETE", "/guest-uploads/" + item.id).catch(function (error) {
        if (error.status === 404) return null;  // never arrived, or already gone
        throw error;
      })
      : item.id && item.committedRef === null
      ? api("POST", "/attachments/" + item.id + "/discard", {}).catch(function (error) {
        if (error.status === 404) return null;  // already gone (tus termination discards too)
        throw error;
      })
      : Promise.resolve(null);
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
    var chosen = order.filter(committable);
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
    var ids = liveItems().filter(function (i) { return i.id && i.committedRef === null && i.status !== "error"; })
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

  // --- Uppy --------------------------------------------------------------------

  /* Uppy's locale for the browser's language (de-AT → de_DE), or null for Uppy's own English. */
  function localeName() {
    var available = metaContent("airlock-uppy-locales").split(" ").filter(Boolean);
    var wanted = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ""];
    for (var i = 0; i < wanted.length; i++) {
      var tag = String(wanted[i]).replace("-", "_");
      var language = tag.split("_")[0].toLowerCase();
      if (language === "en") return null;
      if (available.indexOf(tag) !== -1) return tag;
      for (var j = 0; j < available.length; j++) {
        if (available[j].split("_")[0] === language) return available[j];
      }
    }
    return null;
  }

  function loadLocale() {
    var name = localeName();
    if (!name) return Promise.resolve(null);
    return new Promise(function (resolve) {
      var script = document.createElement("script");
      script.src = metaContent("airlock-uppy-locale-base") + name + ".min.js";
      script.onload = function () { resolve(window.Uppy.locales[name] || null); };
      script.onerror = function () { resolve(null); };  // English then: a missing locale is no reason to fail
      document.head.appendChild(script);
    }).then(function (locale) {
      if (locale) document.documentElement.dataset.uppyLocale = name;
      return locale;
    });
  }

  function idFromTusUrl(url) {
    return url ? url.split("?")[0].replace(/\/+$/, "").split("/").pop() : null;
  }

  function startUppy(locale) {
    var U = window.Uppy;
    uppy = new U.Uppy({
      // One store per user: Golden Retriever must not hand one user's files to another on a shared browser.
      id: "airlock-" + (GUEST ? "guest" + window.location.pathname : clientToken ? "client" : metaContent("airlock-user")),
      autoProceed: true,
      locale: locale || undefined,
      onBeforeFileAdded: function (file) {
        if (file.meta && file.meta.profile) return file;  // restored, or sent again: it has its profile
        var profile = profileFor(file);
        if (!profile) {
          uppy.info("No profile here accepts " + (file.type || "this type") + ": " + file.name, "error", 5000);
          return false;
        }
        file.meta = Object.assign({}, file.meta, {
          profile: profile, filename: file.name, content_type: contentTypeOf(file),
        });
        return file;
      },
    });
    uppy.use(U.Dashboard, {
      inline: true, target: "#dashboard", width: "100%", height: 320, proudlyDisplayPoweredByUppy: false,
      hideUploadButton: true, showRemoveButtonAfterComplete: true, hideRetryButton: false,
    });
    if (STORAGE === "s3") {
      uppy.use(U.AwsS3, Object.assign({ limit: 4, retryDelays: [0, 1000, 3000, 5000] }, s3Callbacks));
    } else {
      uppy.use(U.Tus, {
        endpoint: API + "/tus/", chunkSize: TUS_CHUNK, limit: 4,
        // Ten tries before "Not sent" for a service shedding a burst (503 + Retry-After up to 30 s: it
        // takes minutes to drain, and a guest should not have to press Retry for it); a dropped
        // connection gets the first five (about 20 s), then the page says so and offers Retry.
        retryDelays: [0, 1000, 3000, 5000, 10000, 10000, 15000, 15000, 20000, 30000],
        headers: credentialHeaders({}, true),
        allowedMetaFields: ["profile", "filename", "content_type"],
        removeFingerprintOnSuccess: true,
        onShouldRetry: function (error, attempt, options, next) {
          // A busy service (429, 503) says when to come back: every upload waits that long, then
          // carries on. Uppy's own 429 pause uses the next of retryDelays, which is shorter than
          // the wait the server asked for, and five 429s on a page would end its uploads.
          var response = error && error.originalResponse;
          var status = response ? response.getStatus() : 0;
          var wait = response ? retryAfterMs(status, response.getHeader("Retry-After")) : null;
          if (wait === null && attempt >= 5) return false;
          if (wait !== null) {
            uppy.getPlugin("Tus").requests.rateLimit(Math.max(wait, 500));
            order.forEach(function (item) {
              if (item.status === "queued" || item.status === "uploading") {
                item.ui.detail.textContent = GUEST ? "Busy here, sending again in a moment…"
                  : "the service is busy (" + status + "), sending again in " + Math.round(wait / 1000) + " s";
              }
            });
          }
          return next(error);
        },
        onBeforeRequest: function (req, file) {
          // tus asks the server where it stands (HEAD) only to resume: after a drop, or after a reload.
          var item = file && items[file.id];
          if (item && req.getMethod() === "HEAD") {
            item.resumes += 1;
            item.ui.li.dataset.resumes = String(item.resumes);
            item.ui.detail.textContent = "connection lost, resuming…";
          }
        },
      });
    }
    // Files kept across a reload: as many as the browser's storage comfortably holds.
    uppy.use(U.GoldenRetriever, { indexedDB: { maxFileSize: 128 * MIB, maxTotalSize: 512 * MIB } });

    uppy.on("file-added", function (file) {
      var item = items[file.id];
      if (item && !item.removed) {
        setStatus(item, "queued", "");  // the same file sent again (Retry after a failure)
        return;
      }
      item = createItem(file);
      if (STORAGE !== "s3") item.ui.li.dataset.via = "tus";
      setStatus(item, "queued", "waiting to be sent");
    });
    uppy.on("upload-progress", function (file, progress) {
      var item = items[file.id];
      if (!item || item.removed) return;
      if (item.status !== "uploading") setStatus(item, "uploading", "");
      var total = progress.bytesTotal || file.size;
      item.ui.progress.value = total ? Math.round((progress.bytesUploaded / total) * 100) : 0;
      item.ui.detail.textContent = formatBytes(progress.bytesUploaded) + " of " + formatBytes(total) +
        (item.resumes ? " (resumed " + item.resumes + "×)" : "");
    });
    uppy.on("s3-multipart:part-uploaded", function (file, part) {
      var item = items[file.id];
      if (item) showPart(item, part.PartNumber, "done");
    });
    uppy.on("state-update", function (previous, next) {
      // tus: the upload's URL names the attachment as soon as it is created.
      Object.keys(next.files).forEach(function (fileId) {
        var file = next.files[fileId], item = items[fileId];
        var id = file.tus && idFromTusUrl(file.tus.uploadUrl);
        if (item && id && item.id !== id) setId(item, id);
      });
    });
    uppy.on("upload-success", function (file, response) {
      var item = items[file.id];
      if (!item || item.removed) return;
      if (STORAGE !== "s3") setId(item, idFromTusUrl(response.uploadURL) || item.id);
      // Storage we do not serve may not notify us: say the bytes are there (multipart already did).
      var multipart = !!(file.s3Multipart && file.s3Multipart.uploadId);
      var told = STORAGE === "s3" && !multipart
        ? api("POST", "/uploads/" + item.id + "/complete", {})
        : Promise.resolve(null);
      told.then(function () {
        setStatus(item, "pending", "uploaded, waiting for processing");
        follow(item);
      }, function (error) {
        var what = describe(error);
        setStatus(item, "error", "", what.message, what.retryable, what.code);
      });
    });
    uppy.on("upload-error", function (file, error) {
      var item = file && items[file.id];
      if (!item || item.removed) return;
      var what = describe(error);
      setStatus(item, "error", "", what.message, what.retryable, what.code);
    });
    uppy.on("file-removed", function (file) {
      var item = items[file.id];
      if (item && !item.resending && !item.removed) forget(item);
    });
    uppy.on("restored", function () {
      // Golden Retriever put back the files of the last visit: show them and carry on with the uploads.
      var ghosts = false;
      uppy.getFiles().forEach(function (file) {
        var item = items[file.id] || createItem(file);
        if (STORAGE !== "s3") item.ui.li.dataset.via = "tus";
        var id = file.meta.airlockId || (file.tus && idFromTusUrl(file.tus.uploadUrl));
        if (id) setId(item, id);
        ghosts = ghosts || file.isGhost;
        if (file.progress.uploadComplete && item.id) {
          setStatus(item, "pending", "uploaded, waiting for processing");
          follow(item);
        } else {
          setStatus(item, "queued", file.isGhost ? "pick this file again to resume it" : "resuming…");
        }
      });
      // Without the bytes (a file too large to keep) the Dashboard asks for the file again first.
      if (!ghosts && uppy.getState().recoveredState) uppy.emit("restore-confirmed");
    });
    onProfile();
  }

  document.addEventListener("DOMContentLoaded", function () {
    ["profile", "items", "empty", "ref", "commit", "heartbeat"].forEach(function (id) {
      els[id] = document.getElementById(id);
    });
    els.hint = document.getElementById("profile-hint");
    els.pageError = document.getElementById("page-error");
    els.commitResult = document.getElementById("commit-result");
    els.profile.addEventListener("change", onProfile);
    els.commit.addEventListener("click", commit);
    refreshCommitButton();
    // The picker appears once the profiles are known: a file chosen before them would find no
    // profile that takes it and be refused (a slow connection, a busy server).
    Promise.all([loadLocale(), loadProfiles()]).then(function (loaded) {
      startUppy(loaded[0]);
      onProfile();  // the picker's restriction for the chosen profile
    });
    setInterval(heartbeat, HEARTBEAT_MS);
    // For tests and curious developers: the page's state, read-only use.
    window.airlock = {
      items: order, heartbeat: heartbeat,
      uppy: function () { return uppy; },
    };
  });
})();
