"""The retention concern's writes (erasure of a subject, holds on a ref, release of a committed ref, dead letters
of failed deletes, objects found missing, the retention purge): like attachments/services, the only place its
rows change."""
