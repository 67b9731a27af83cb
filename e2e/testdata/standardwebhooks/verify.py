"""Verifies webhooks with the Standard Webhooks Python library.

Reads a JSON list of {"secret", "body", "headers"} on stdin and prints one
JSON list of {"ok": bool, "error": str, "members": [str]} in the same
order. A webhook whose headers hold webhook-batch-size is a batch
(docs/receiver-guide.md, "Batches"): once the signature over the whole
body verifies, its body is read as a batch and "members" lists the
member ids in order; a body that is not a batch of that many members is
not ok. "members" is empty for a single webhook.
"""

import base64
import json
import sys

from standardwebhooks.webhooks import Webhook


def batch_members(body: str, size: str) -> list:
    """Returns the member ids of a verified batch body, checking it as a receiver would."""
    doc = json.loads(body)
    if doc.get("type") != "batch" or not isinstance(doc.get("data"), list):
        raise ValueError('not a batch body: want {"type":"batch","data":[…]}')
    if len(doc["data"]) != int(size):
        raise ValueError(f"webhook-batch-size says {size} members, the body lists {len(doc['data'])}")
    ids = []
    for i, m in enumerate(doc["data"]):
        if not m.get("id") or not m.get("type") or not m.get("timestamp"):
            raise ValueError(f"member {i} lacks its id, type or timestamp")
        if "payload_base64" in m:
            base64.b64decode(m["payload_base64"], validate=True)
        elif "payload" not in m:
            raise ValueError(f"member {i} ({m['id']}) has no payload")
        ids.append(m["id"])
    return ids


def main() -> None:
    out = []
    for case in json.load(sys.stdin):
        try:
            Webhook(case["secret"]).verify(case["body"], case["headers"])
            size = {k.lower(): v for k, v in case["headers"].items()}.get("webhook-batch-size")
            members = batch_members(case["body"], size) if size is not None else []
            out.append({"ok": True, "error": "", "members": members})
        except Exception as e:  # noqa: BLE001 - every failure is reported
            out.append({"ok": False, "error": f"{type(e).__name__}: {e}", "members": []})
    json.dump(out, sys.stdout)


main()
