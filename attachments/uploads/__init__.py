"""Uploads: the ways a file's bytes arrive. An intent mints the key and says where to send them (a signed PUT or
POST, S3 multipart parts, or tus pieces); every path ends in the same arrival, recorded once, that starts
intake. The attachments app's part of the concern is in this package, but for the pieces listed under
"Outside it".

- `services/`: the writes. `intents.py` validates the claims and writes the pending row (taking quota room,
  rate and pending caps, a client token's or a link's grant), with `fastpath_insert.py` its one-statement
  INSERT on PostgreSQL; `uploads.py` is the local signed PUT, upload-through, the completion hint and
  `object_arrived`, the one arrival every path ends in; `multipart.py` re-signs an S3 multipart upload's part
  URLs and aborts its parts when the intent dies; `tus.py` is the resumable upload (create, append under a
  claim, terminate, expire); `never_uploaded.py` ends committed intents whose bytes never came.
- `api.py`: POST /api/v1/uploads, PUT /api/v1/uploads/{id}/content, POST /api/v1/uploads/{id}/complete and
  /parts, and tus at /api/v1/tus/ (routed in attachments/api/urls.py).

Outside it: the rows (the Attachment an intent makes, TusUpload, StorageEvent) are in attachments/models.py
with the rest. Upload-through (POST /api/v1/attachments) is served by the list's view in
attachments/api/views.py, which owns that URL. Storage notifications (attachments/services/storage_events.py,
its view attachments/api/storage_events.py, the queue consumer cloudflare_queue.py and `manage.py
consume_storage_events`) hand an object-created record to `object_arrived` here but read the bucket's whole
event stream, removals and keys we never minted among them. Quotas, rate limits, the backlog brake and client
tokens' grants stay in attachments/services/ (quotas.py, ratelimits.py, backlog.py, client_grants.py), shared
with links, erasure and release; a link's grant is attachments/links/services/link_grants.py. The gateways'
signed URLs, multipart and tus staging are the storage layer's (attachments/storage/). Discarding an intent
(attachments/services/lifecycle.py) aborts its parts through `services/multipart.py`; the sweeper's reaping,
expiry and reconcile (sweeper/, a higher app) and the pipeline's recovery (processing/recovery.py) call
`services/` too. The upload page is attachments/pages.py (templates/upload.html,
attachments/static/airlock/upload.js); the tests are mostly in tests/api/ (test_intents.py, test_upload_*.py,
test_tus.py), tests/s3/ and tests/security/test_tus_*.py.
"""
