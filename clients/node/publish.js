'use strict';
// Create an endpoint, publish one event to it and follow its delivery.
//
// Environment:
//   HOOKLINE_ADDR          ingest's gRPC address (default 127.0.0.1:7070)
//   HOOKLINE_API_KEY       API key (required)
//   HOOKLINE_RECEIVER_URL  where the endpoint receives (default http://127.0.0.1:9000/webhooks)
//   HOOKLINE_WAIT_SECONDS  how long to wait for the delivery (default 60)
//
// Run after `make clients-node`: node clients/node/publish.js

const { randomUUID } = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const { clients, auth, call, TERMINAL } = require('./hookline');

async function main() {
  const addr = process.env.HOOKLINE_ADDR || '127.0.0.1:7070';
  const apiKey = process.env.HOOKLINE_API_KEY;
  if (!apiKey) {
    console.error('set HOOKLINE_API_KEY (make run prints one)');
    return 2;
  }
  const receiver = process.env.HOOKLINE_RECEIVER_URL || 'http://127.0.0.1:9000/webhooks';
  const waitMs = 1000 * Number(process.env.HOOKLINE_WAIT_SECONDS || '60');
  const md = auth(apiKey);
  const c = clients(addr);
  try {
    const { endpoint } = await call(c.endpoints, 'CreateEndpoint', { url: receiver, description: 'node example' }, md);
    console.log(`endpoint ${endpoint.id} created for ${endpoint.url}`);

    // One key per logical publish, made before the first try.
    const key = randomUUID();
    const published = await call(c.events, 'PublishEvent', {
      event_type: 'example.node',
      payload: Buffer.from(JSON.stringify({ language: 'node', key })),
      idempotency_key: key,
      endpoint_ids: [endpoint.id],
    }, md);
    console.log(`event ${published.event_id} published with idempotency key ${key}`);

    const deliveryId = published.deliveries[0].delivery_id;
    const deadline = Date.now() + waitMs;
    let last;
    for (;;) {
      const { delivery } = await call(c.deliveries, 'GetDelivery', { delivery_id: deliveryId }, md);
      if (delivery.state !== last) {
        console.log(`delivery ${deliveryId} ${delivery.state} attempts=${delivery.attempts}`);
        last = delivery.state;
      }
      if (TERMINAL.has(delivery.state)) {
        return delivery.state === 'DELIVERY_STATE_DELIVERED' ? 0 : 1;
      }
      if (Date.now() > deadline) {
        console.error(`delivery ${deliveryId} still ${delivery.state} after ${waitMs / 1000} s`);
        return 1;
      }
      await sleep(200);
    }
  } finally {
    c.close();
  }
}

main().then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(err.message || err); process.exitCode = 1; },
);
