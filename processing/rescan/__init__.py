"""Rescans of ready files: the processing app's part, scanning.

- `jobs.py`: the `rescan` job (scan the stored object with every scanner configured; record clean or
  take down through attachments/rescan/services.py) and `rescan_tick`, the background walk the
  scheduler runs when the signatures in force change, with the signature version noted at worker boot.

The rows (checkpoint, outcomes, flags) are attachments/rescan/'s; the operator's commands are the
sweeper's (sweeper/rescans.py).
"""
