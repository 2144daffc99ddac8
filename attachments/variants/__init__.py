"""Named variants: the sizes of an image made on first request for galleries and `srcset`, and the console's
PDF page previews made the same way. Everything of the concern the attachments app holds is in this package.

- `spec.py`: which variants a profile has (AIRLOCK_VARIANTS), the derivative kind `variant:<name>:<format>`
  the row, the claim and the storage key share, the format an `Accept` gets, ETags, `srcset` widths. Pure.
- `services/`: the writes. `obtain.py` makes a variant once however many requests ask (a VariantClaim row
  is the single flight), `purge.py` forgets a file's variants (rows now, objects after commit, under the
  sweeper's brakes).
- `api.py`: GET /api/v1/attachments/{id}/variants/{name} (routed in attachments/api/urls.py).
- `admin.py`: the change page's variants box, the preview's `srcset` and the staff view that serves one
  (wired in attachments/admin/modeladmins.py; the purge action is in attachments/admin/actions.py).

Outside it: the sandbox renderer is processing's (processing/variants.py, registered through
attachments/hooks.py, which keeps this app from importing processing), the box's template is
templates/admin/attachments/attachment/variants.html, and the tests are in tests/variants/.
"""
