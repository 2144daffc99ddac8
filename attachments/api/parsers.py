"""DRF's JSON parser, with a document nested too deeply for Python's parser answered as a 400."""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:  # e.g. 100,000 nested "[": json.loads gives up with RecursionError, a 500
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
