"""Rescans of ready files: the attachments app's part, the rows. A file rescanned stays `ready` and served;
only a hit moves it, straight to `rejected`.

- `services.py`: the background walk's checkpoint row and its advance (which files are queued next,
  newest first, held back while uploads wait), the outcome of one rescan (clean: the signatures noted;
  a hit: taken down and quarantined), and flagging files for the walk.

Outside it: the job that scans a file and the scheduler's walk are processing's (processing/rescan/,
since scanning is processing's and attachments never imports processing); `manage.py rescan` and
`backfill --rescan` select and flag files through the sweeper (sweeper/rescans.py, beside the backfill
it shares its selection with); a staff "Rescan" of one file is a moderation action
(attachments/services/moderation.py). The tests are tests/pipeline/test_rescan.py.
"""
