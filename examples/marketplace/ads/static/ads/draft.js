// The ad draft page: photos go to Airlock first, through plans the host asks for.
//
// The browser never holds an Airlock API token. For each photo it asks the host for an
// upload plan (the host creates the intent with its own token) and sends the bytes to the
// plan's URL, whose single-use, short-lived credential is in the URL (or the signed form);
// then it tells the host, which completes the intent. Outcomes arrive at the host by
// webhook; this page reads the host's records, never Airlock's API.
"use strict";

(function () {
  const root = document.getElementById("draft");
  const csrf = document.querySelector("meta[name=csrf-token]").content;
  const list = document.getElementById("photos");
  const message = document.getElementById("message");
  const postButton = document.getElementById("post");
  const urls = { photos: root.dataset.photos, heartbeat: root.dataset.heartbeat, sent: root.dataset.sent };
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const sending = new Map();  // local name -> state, for photos not yet known to the host
  let inFlight = 0;

  // A POST to the host; no body unless there is something to say (the views that take none read none).
  function hostPost(url, body) {
    const headers = { "X-CSRFToken": csrf };
    if (body === undefined) return fetch(url, { method: "POST", credentials: "same-origin", headers });
    headers["Content-Type"] = "application/json";
    return fetch(url, { method: "POST", credentials: "same-origin", headers, body: JSON.stringify(body) });
  }

  // Send the bytes as the plan says: a raw PUT with its headers, or a form POST with its fields, file last.
  async function sendBytes(file, plan) {
    let answer;
    if (plan.method === "PUT") {
      answer = await fetch(plan.url, { method: "PUT", headers: plan.headers || {}, body: file });
    } else {
      const form = new FormData();
      for (const [name, value] of Object.entries(plan.fields || {})) form.append(name, value);
      form.append("file", file);
      answer = await fetch(plan.url, { method: "POST", body: form });
    }
    if (!answer.ok) throw new Error("the upload was refused (" + answer.status + ")");
  }

  async function uploadOne(file) {
    inFlight += 1;
    sync();
    const key = file.name + ":" + Math.random();
    sending.set(key, { filename: file.name, status: "uploading" });
    render(lastPhotos);
    try {
      const asked = await hostPost(urls.photos, { filename: file.name, size: file.size,
        content_type: file.type || "application/octet-stream" });
      const body = await asked.json();
      if (!asked.ok) throw new Error(body.error || "refused");
      await sendBytes(file, body.upload);
      const sent = await hostPost(urls.sent.replace(PLACEHOLDER, body.id));
      if (!sent.ok) throw new Error("the host could not complete it (" + sent.status + ")");
      sending.delete(key);
    } catch (error) {
      sending.set(key, { filename: file.name, status: "failed", reason: String(error.message || error) });
    } finally {
      inFlight -= 1;
      await refresh();
    }
  }

  let lastPhotos = [];

  function item(photo) {
    const li = document.createElement("li");
    li.className = "photo";
    li.dataset.status = photo.status;
    if (photo.id) li.dataset.id = photo.id;
    if (photo.thumbnail) {
      const img = document.createElement("img");
      img.className = "thumb";
      img.alt = photo.filename;
      img.src = photo.thumbnail;  // Airlock's signed link: no header needed
      li.append(img);
    }
    const name = document.createElement("div");
    name.className = "name";
    name.textContent = photo.filename;
    const status = document.createElement("div");
    status.className = "status";
    status.textContent = photo.status + (photo.reason ? ": " + photo.reason : "");
    li.append(name, status);
    return li;
  }

  function render(photos) {
    lastPhotos = photos;
    const shown = photos.filter((p) => p.status !== "discarded").concat([...sending.values()]);
    // Keep existing <img> elements when nothing changed, so thumbnails do not flicker.
    const signature = JSON.stringify(shown);
    if (list.dataset.signature === signature) return;
    list.dataset.signature = signature;
    list.replaceChildren(...shown.map(item));
  }

  function sync() {
    postButton.disabled = inFlight > 0;
    message.textContent = inFlight > 0 ? "Uploading " + inFlight + " photo(s)…" : "";
  }

  async function refresh() {
    const answer = await fetch(urls.photos, { credentials: "same-origin" });
    if (answer.ok) render((await answer.json()).photos);
    sync();
  }

  async function heartbeat() {
    const answer = await hostPost(urls.heartbeat);
    if (answer.ok) render((await answer.json()).photos);
  }

  // Until a photo's outcome is known, re-read the host's records (they change when Airlock's webhook lands).
  function waiting() {
    return inFlight > 0 || lastPhotos.some((p) => p.status === "uploading" || p.status === "pending");
  }

  document.getElementById("picker").addEventListener("change", (event) => {
    for (const file of event.target.files) uploadOne(file);
    event.target.value = "";
  });
  setInterval(() => { if (waiting()) refresh(); }, 1000);
  setInterval(heartbeat, Math.max(1, Number(root.dataset.heartbeatSeconds)) * 1000);
  heartbeat();
})();
