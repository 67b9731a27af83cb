'use strict';
// Read Hookline's results topic and print each delivery's outcome.
//
// Every AttemptResult on hookline.results is decoded with the types made
// from proto/. Hookline writes that topic in Kafka transactions, so the
// consumer reads committed records only (readUncommitted: false).
//
// Environment:
//   HOOKLINE_KAFKA_BROKERS  bootstrap servers (default 127.0.0.1:9092, make run's)
//   HOOKLINE_RESULTS_TOPIC  default hookline.results
//   HOOKLINE_RESULTS_GROUP  consumer group (default hookline-results-example)
//   HOOKLINE_WAIT_SECONDS   with a delivery id: how long to wait for it (default 60)
//
// Usage: node clients/node/results.js [DELIVERY_ID]
// With DELIVERY_ID it stops at that delivery's terminal result (exit 0 when
// delivered); without, it prints results until interrupted.

const { Kafka, logLevel } = require('kafkajs');
const { decodeAttemptResult, TERMINAL } = require('./hookline');

function describe(r) {
  return `${r.delivery_id} attempt=${r.attempt} state=${r.state} class=${r.class} ` +
    `status=${r.status_code} event=${r.event_id} endpoint=${r.endpoint_id}`;
}

async function main() {
  const want = process.argv[2];
  const kafka = new Kafka({
    clientId: 'hookline-results-example',
    brokers: (process.env.HOOKLINE_KAFKA_BROKERS || '127.0.0.1:9092').split(','),
    logLevel: logLevel.WARN,
  });
  const consumer = kafka.consumer({
    groupId: process.env.HOOKLINE_RESULTS_GROUP || 'hookline-results-example',
    readUncommitted: false,
  });
  await consumer.connect();
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  process.once('SIGINT', () => finish(0));
  process.once('SIGTERM', () => finish(0));
  if (want) {
    const waitMs = 1000 * Number(process.env.HOOKLINE_WAIT_SECONDS || '60');
    setTimeout(() => {
      console.error(`no terminal result for ${want} in time`);
      finish(1);
    }, waitMs).unref();
  }
  try {
    await consumer.subscribe({ topics: [process.env.HOOKLINE_RESULTS_TOPIC || 'hookline.results'], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const result = decodeAttemptResult(message.value);
        console.log(describe(result));
        if (result.delivery_id === want && TERMINAL.has(result.state)) {
          finish(result.state === 'DELIVERY_STATE_DELIVERED' ? 0 : 1);
        }
      },
    });
    return await done;
  } finally {
    await consumer.disconnect();
  }
}

main().then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(err.message || err); process.exitCode = 1; },
);
