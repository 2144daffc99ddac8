"""The uploads concern's writes (intents, the arrival of bytes by every path, multipart parts, tus, intents whose
bytes never came): like attachments/services, the only place its rows change."""
