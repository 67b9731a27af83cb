"""Verifies webhooks with the Standard Webhooks Python library.

Reads a JSON list of {"secret", "body", "headers"} on stdin and prints one
JSON list of {"ok": bool, "error": str} in the same order.
"""

import json
import sys

from standardwebhooks.webhooks import Webhook


def main() -> None:
    out = []
    for case in json.load(sys.stdin):
        try:
            Webhook(case["secret"]).verify(case["body"], case["headers"])
            out.append({"ok": True, "error": ""})
        except Exception as e:  # noqa: BLE001 - every failure is reported
            out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout)


main()
