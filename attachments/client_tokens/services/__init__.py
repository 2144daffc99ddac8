"""The client tokens concern's writes (minting, revoking, a subject's logout, a token's grant and budget at
use): like attachments/services, the only place its rows change."""
