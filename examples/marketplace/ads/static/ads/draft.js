// The ad draft page: photos go to Airlock first, straight from the browser, with a client token.
//
// The host minted the page a client token for this seller (data-token): it may create
// intents for photos, send their bytes, heartbeat and complete them, for this seller only,
// and nothing else (no commit, no other seller's files). The host's service token never
// reaches the page. The browser tells the host each new photo's id (the host checks with
// Airlock that it is this seller's, then records it); outcomes arrive at the host by
// webhook, and this page reads the host's records for them. Posting commits on the host.
"use strict";

(function () {
  const root = document.getElementById("draft");
  const csrf = document.querySelector("meta[name=csrf-token]").content;
  const list = document.getElementById("photos");
  const message = document.getElementById("message");
  const postButton = document.getElementById("post");
  const urls = { photos: root.dataset.photos };
  const airlockBase = root.dataset.airlock + "/api/v1/";
  const token = root.dataset.token;
  const sending = new Map();  // local name -> state, for photos not yet known to the host
  let inFlight = 0;

  // A POST to the host; no body unless there is something to say (the views that take none read none).
  function hostPost(url, body) {
    const headers = { "X-CSRFToken": csrf };
    if (body === undefined) return fetch(url, { method: "POST", credentials: "same-origin", headers });
    headers["Content-Type"] = "application/json";
    return fetch(url, { method: "POST", credentials: "same-origin", headers, body: JSON.stringify(body) });
  }

  // A call to Airlock's API with the page's client token (CORS: Airlock lists this origin).
  async function airlock(method, path, body) {
    const init = { method, headers: { Authorization: "Bearer " + token } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const answer = await fetch(airlockBase + path, init);
    const data = answer.status === 204 ? null : await answer.json();
    if (!answer.ok) throw new Error((data && data.error && data.error.message) || "refused (" + answer.status + ")");
    return data;
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
      const intent = await airlock("POST", "uploads", { profile: root.dataset.profile, filename: file.name,
        size: file.size, content_type: file.type || "application/octet-stream" });
      if (intent.upload.parts) {  // an S3 multipart plan: far larger than a photo needs to be
        await airlock("POST", "attachments/" + intent.id + "/discard");
        throw new Error("this photo is too large for the marketplace");
      }
      // Before the bytes: the host knows the photo when Airlock's webhook about it arrives.
      const recorded = await hostPost(urls.photos, { id: intent.id });
      if (!recorded.ok) throw new Error("the host could not record it (" + recorded.status + ")");
      await sendBytes(file, intent.upload);
      // Needed on S3 without bucket events, harmless otherwise.
      await airlock("POST", "uploads/" + intent.id + "/complete");
      sending.delete(key);
    } catch (error) {
      sending.set(key, { filename: file.name, status: "failed", reason: String(error.message || error) });
    } finally {
      inFlight -= 1;
      await refresh();
    }
  }

  let lastPhotos = [];
  const GONE = ["rejected", "failed", "discarded", "deleted"];

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

  // Keep the open draft's photos alive in Airlock (an abandoned draft stops beating and is swept).
  async function heartbeat() {
    const ids = lastPhotos.filter((p) => p.id && !GONE.includes(p.status)).map((p) => p.id);
    if (ids.length) await airlock("POST", "attachments/heartbeat", { ids }).catch(() => {});
    await refresh();
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
