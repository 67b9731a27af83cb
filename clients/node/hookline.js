'use strict';
// The Hookline client for Node, made from proto/ at run time: gRPC service
// clients through @grpc/proto-loader, message types (for decoding Kafka
// records) through protobufjs, which proto-loader itself uses. A field
// added to proto/ is there on the next run; nothing generated is committed.

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const protoDir = process.env.HOOKLINE_PROTO_DIR || path.join(__dirname, '..', '..', 'proto');
const files = fs
  .readdirSync(path.join(protoDir, 'hookline', 'v1'))
  .filter((f) => f.endsWith('.proto'))
  .map((f) => path.join('hookline', 'v1', f));

// Field names as in the .proto (delivery_id), enums as their names.
const loaderOptions = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

// google/api/annotations.proto (the HTTP mapping's option) and
// buf/validate/validate.proto (the field rules' options) are vendored
// beside proto/.
const googleapisDir = process.env.HOOKLINE_GOOGLEAPIS_DIR || path.join(protoDir, '..', 'third_party', 'googleapis');
const protovalidateDir = process.env.HOOKLINE_PROTOVALIDATE_DIR || path.join(protoDir, '..', 'third_party', 'protovalidate');

const v1 = grpc.loadPackageDefinition(
  protoLoader.loadSync(files, { ...loaderOptions, includeDirs: [protoDir, googleapisDir, protovalidateDir] }),
).hookline.v1;

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => {
  // google/protobuf/*.proto are built into protobufjs.
  if (target.startsWith('google/protobuf/')) return target;
  if (target.startsWith('google/')) return path.join(googleapisDir, target);
  if (target.startsWith('buf/')) return path.join(protovalidateDir, target);
  return path.join(protoDir, target);
};
root.loadSync(files, { keepCase: true }).resolveAll();

// Retries happen in gRPC itself, by the policy in this service config:
// UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED only, at most 5
// attempts inside a 20 s deadline, exponential backoff with full jitter,
// a server's grpc-retry-pushback-ms honoured. A retry resends the same
// request, so one idempotency key is what every try carries.
const serviceConfig = fs.readFileSync(path.join(__dirname, '..', 'service-config.json'), 'utf8');

// clients returns the three service clients over one channel to addr.
function clients(addr) {
  const channelOptions = { 'grpc.service_config': serviceConfig, 'grpc.enable_retries': 1 };
  const endpoints = new v1.EndpointService(addr, grpc.credentials.createInsecure(), channelOptions);
  const shared = { ...channelOptions, channelOverride: endpoints.getChannel() };
  return {
    endpoints,
    events: new v1.EventService(addr, grpc.credentials.createInsecure(), shared),
    deliveries: new v1.DeliveryService(addr, grpc.credentials.createInsecure(), shared),
    close: () => endpoints.close(),
  };
}

// auth is the call metadata that carries the API key.
function auth(apiKey) {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${apiKey}`);
  return md;
}

// call runs a unary RPC and resolves with its response.
function call(client, method, request, metadata) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

const AttemptResult = root.lookupType('hookline.v1.AttemptResult');

// decodeAttemptResult decodes one record of the results topic.
function decodeAttemptResult(bytes) {
  return AttemptResult.toObject(AttemptResult.decode(bytes), loaderOptions);
}

const TERMINAL = new Set([
  'DELIVERY_STATE_DELIVERED',
  'DELIVERY_STATE_FAILED',
  'DELIVERY_STATE_EXPIRED',
  'DELIVERY_STATE_ENDPOINT_DELETED',
]);

module.exports = { clients, auth, call, decodeAttemptResult, TERMINAL };
