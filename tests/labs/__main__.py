"""``python -m tests.labs FUNCTION '[ARGS]'``: a function of tests/labs/inside.py in this
environment's Django (what ``Stack.call`` runs); its result as JSON on the last line."""

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "beeweb.settings")
django.setup()

from tests.labs.inside import FUNCTIONS  # noqa: E402 - after django.setup()

function, args = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "[]")
print(json.dumps(FUNCTIONS[function](*args), default=str))
