"""Create an endpoint, publish one event to it and follow its delivery.

Environment:
  HOOKLINE_ADDR          ingest's gRPC address (default 127.0.0.1:7070)
  HOOKLINE_API_KEY       API key (required)
  HOOKLINE_RECEIVER_URL  where the endpoint receives (default http://127.0.0.1:9000/webhooks)
  HOOKLINE_WAIT_SECONDS  how long to wait for the delivery (default 60)

Run after `make clients-python`:
  bin/clients/python/venv/bin/python clients/python/publish.py
"""

import json
import os
import pathlib
import sys
import time
import uuid

import grpc

from hookline.v1 import delivery_pb2, delivery_pb2_grpc
from hookline.v1 import endpoint_pb2, endpoint_pb2_grpc
from hookline.v1 import event_pb2, event_pb2_grpc
from hookline.v1 import records_pb2

# Retries happen in gRPC itself, by the policy in this service config:
# UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED only, at most 5
# attempts inside a 20 s deadline, exponential backoff with full jitter, a
# server's grpc-retry-pushback-ms honoured. A retry resends the same
# request, so the idempotency key made below is the one every try carries.
SERVICE_CONFIG = (pathlib.Path(__file__).resolve().parent.parent / "service-config.json").read_text()

TERMINAL = {
    records_pb2.DELIVERY_STATE_DELIVERED,
    records_pb2.DELIVERY_STATE_FAILED,
    records_pb2.DELIVERY_STATE_EXPIRED,
    records_pb2.DELIVERY_STATE_ENDPOINT_DELETED,
}


def main() -> int:
    addr = os.environ.get("HOOKLINE_ADDR", "127.0.0.1:7070")
    api_key = os.environ.get("HOOKLINE_API_KEY")
    if not api_key:
        print("set HOOKLINE_API_KEY (make run prints one)", file=sys.stderr)
        return 2
    receiver = os.environ.get("HOOKLINE_RECEIVER_URL", "http://127.0.0.1:9000/webhooks")
    wait = float(os.environ.get("HOOKLINE_WAIT_SECONDS", "60"))
    auth = [("authorization", f"Bearer {api_key}")]

    channel = grpc.insecure_channel(
        addr,
        options=[("grpc.service_config", SERVICE_CONFIG), ("grpc.enable_retries", 1)],
    )
    endpoints = endpoint_pb2_grpc.EndpointServiceStub(channel)
    events = event_pb2_grpc.EventServiceStub(channel)
    deliveries = delivery_pb2_grpc.DeliveryServiceStub(channel)

    ep = endpoints.CreateEndpoint(
        endpoint_pb2.CreateEndpointRequest(url=receiver, description="python example"),
        metadata=auth,
        timeout=10,
    ).endpoint
    print(f"endpoint {ep.id} created for {ep.url}")

    # One key per logical publish, made before the first try.
    key = str(uuid.uuid4())
    published = events.PublishEvent(
        event_pb2.PublishEventRequest(
            event_type="example.python",
            payload=json.dumps({"language": "python", "key": key}).encode(),
            idempotency_key=key,
            endpoint_ids=[ep.id],
        ),
        metadata=auth,
    )
    print(f"event {published.event_id} published with idempotency key {key}")

    delivery_id = published.deliveries[0].delivery_id
    deadline = time.monotonic() + wait
    last = None
    while True:
        status = deliveries.GetDelivery(
            delivery_pb2.GetDeliveryRequest(delivery_id=delivery_id), metadata=auth
        ).delivery
        state = records_pb2.DeliveryState.Name(status.state)
        if state != last:
            print(f"delivery {delivery_id} {state} attempts={status.attempts}")
            last = state
        if status.state in TERMINAL:
            return 0 if status.state == records_pb2.DELIVERY_STATE_DELIVERED else 1
        if time.monotonic() > deadline:
            print(f"delivery {delivery_id} still {state} after {wait:.0f} s", file=sys.stderr)
            return 1
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
