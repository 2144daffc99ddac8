"""Retention: what is kept, for how long, and how it goes. The attachments app's part of the concern is in
this package, but for the pieces listed under "Outside it".

- `services/`: the writes. `erasure.py` lets every file of a user, a tenant or a subject go at once and
  revokes its tokens; `holds.py` keeps a file, or every file of a ref, from every delete path (legal
  holds); `release.py` ends a committed file's life (release, delete, restore within the grace);
  `dead_letters.py` opens the dead letters of work that ran out of retries, failed deletes among them;
  `missing_objects.py` records what reconcile decided about ready files whose objects vanished;
  `retention.py` deletes the rows past their retention window that the sweeper picked.
- `api.py`: POST /api/v1/subjects/erase (routed in attachments/api/urls.py).

Outside it: removing objects, walking tables and reconciling storage are the sweeper's, a higher app
(sweeper/erasure.py, dead_letters.py, missing_objects.py, retention.py, reaping.py, and the `erase_*`
commands); webhooks' rows are purged by webhooks/services/retention.py. Release, delete and restore are
served beside discard and commit in attachments/api/lifecycle.py, and the admin's hold actions and boxes
sit among the others in attachments/admin/ (actions.py, modeladmins.py); `manage.py hold` is
attachments/management/commands/hold.py.
"""
