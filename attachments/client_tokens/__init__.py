"""Client tokens: short-lived tokens a host mints with its service token for one of its people's devices, and
what they may do. A token acts as the minting account confined to one subject, within its grant (the profiles
it may upload to, the one ref it may commit to, a budget of files and bytes). The attachments app's part of the
concern is in this package, but for the pieces listed under "Outside it".

- `services/`: the writes. `client_tokens.py` mints, finds, revokes and logs a subject out (its tokens
  revoked, its staged uploads discarded); `client_grants.py` checks a token's grant where it is used (a
  profile at intent, the ref at commit, the budget taken in the intent's transaction).
- `api.py`: POST /api/v1/client-tokens, DELETE /api/v1/client-tokens/{id} and POST /api/v1/subjects/logout,
  for service tokens only (routed in attachments/api/urls.py).
- `scope.py`: which views a client token may call, one allowlist closed by default (REST_FRAMEWORK's
  DEFAULT_PERMISSION_CLASSES in config/settings/base.py; a view opens itself with `client_token_allowed`).

Outside it: the row (ClientToken) is in attachments/models.py with the rest; reading an `act_` key off a
request is attachments/api/auth.py, which authenticates API tokens too; acting for a subject is
attachments/subjects.py, shared with a service token's `Airlock-Subject` header. The intent and commit
services (attachments/services/intents.py, lifecycle.py) check the grant through `services/client_grants.py`;
guests' tokens are minted by attachments/links/; expired tokens are purged and an erased subject's revoked by
attachments/retention/ (the sweeper's retention rule in sweeper/retention.py). The tests are in
tests/subjects/ (the Python client's in tests/client/).
"""
