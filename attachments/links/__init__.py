"""Guest links: a host hands its guests (no account) an upload link, guests send files through it, and the
host approves or declines them when the link asks for approval. The attachments app's part of the concern is
in this package, but for the pieces listed under "Outside it".

- `services/`: the writes. `upload_links.py` makes, lists and disables links and opens a guest per device
  (its subject, its short-lived client token); `link_grants.py` checks a link's grant at a guest's intent
  (still open, its limits per guest and in all); `link_files.py` commits guests' files to the link's ref
  once ready and approved; `approval.py` is the host's approve or decline.
- `api.py`: /api/v1/upload-links, /api/v1/upload-links/{id}, /api/v1/guest-uploads/{id} and
  POST /api/v1/attachments/approve and /decline (routed in attachments/api/urls.py).
- `admin.py`: the upload links' list and the approval queue (registered from attachments/admin/__init__.py;
  the queue's URL and the status cell's link to it are wired in attachments/admin/modeladmins.py).
- `page.py`: the guests' page (`/l/<id>`) and its QR codes (routed in config/urls.py).

Outside it: the rows (UploadLink, LinkGuest, the attachment's `approval`) are in attachments/models.py with
the rest; the intent service (attachments/uploads/services/intents.py) takes a link's grant and the pipeline
(processing/pipeline.py, a higher app) settles a guest's file once ready, both through `services/`; the
absolute URLs of the page and its QR codes come from attachments/api/links.py, shared by every endpoint.
The page is the upload page in guest mode (attachments/pages.py, templates/upload.html,
attachments/static/airlock/upload.js; a closed link gets templates/guest_closed.html), the queue's templates
are under templates/admin/, and the tests are in tests/links/ (the console's in tests/admin/).
"""
