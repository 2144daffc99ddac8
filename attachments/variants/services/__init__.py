"""The variants concern's writes: like attachments/services, the only place its rows change."""
