"""Read Hookline's results topic and print each delivery's outcome.

Every AttemptResult on hookline.results is decoded with the classes
generated from proto/. Hookline writes that topic in Kafka transactions, so
the consumer reads committed records only (isolation.level=read_committed).

Environment:
  HOOKLINE_KAFKA_BROKERS  bootstrap servers (default 127.0.0.1:9092, make run's)
  HOOKLINE_RESULTS_TOPIC  default hookline.results
  HOOKLINE_RESULTS_GROUP  consumer group (default hookline-results-example)
  HOOKLINE_WAIT_SECONDS   with a delivery id: how long to wait for it (default 60)

Usage:
  bin/clients/python/venv/bin/python clients/python/results.py [DELIVERY_ID]
With DELIVERY_ID it stops at that delivery's terminal result (exit 0 when
delivered); without, it prints results until interrupted.
"""

import os
import sys
import time

from confluent_kafka import Consumer, KafkaException

from hookline.v1 import records_pb2

TERMINAL = {
    records_pb2.DELIVERY_STATE_DELIVERED,
    records_pb2.DELIVERY_STATE_FAILED,
    records_pb2.DELIVERY_STATE_EXPIRED,
    records_pb2.DELIVERY_STATE_ENDPOINT_DELETED,
}


def describe(r: records_pb2.AttemptResult) -> str:
    return (
        f"{r.delivery_id} attempt={r.attempt} state={records_pb2.DeliveryState.Name(r.state)} "
        f"class={records_pb2.OutcomeClass.Name(getattr(r, 'class'))} status={r.status_code} "
        f"event={r.event_id} endpoint={r.endpoint_id}"
    )


def main() -> int:
    want = sys.argv[1] if len(sys.argv) > 1 else None
    deadline = time.monotonic() + float(os.environ.get("HOOKLINE_WAIT_SECONDS", "60"))
    consumer = Consumer(
        {
            "bootstrap.servers": os.environ.get("HOOKLINE_KAFKA_BROKERS", "127.0.0.1:9092"),
            "group.id": os.environ.get("HOOKLINE_RESULTS_GROUP", "hookline-results-example"),
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([os.environ.get("HOOKLINE_RESULTS_TOPIC", "hookline.results")])
    try:
        while want is None or time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                print(f"kafka: {msg.error()} (retrying)", file=sys.stderr)
                continue
            result = records_pb2.AttemptResult.FromString(msg.value())
            print(describe(result), flush=True)
            if result.delivery_id == want and result.state in TERMINAL:
                return 0 if result.state == records_pb2.DELIVERY_STATE_DELIVERED else 1
        print(f"no terminal result for {want} in time", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
