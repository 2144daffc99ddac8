"""The guest links concern's writes (making links and opening guests, each link's grant at an intent, guests'
files reaching the link's ref, the host's approval): like attachments/services, the only place its rows change."""
