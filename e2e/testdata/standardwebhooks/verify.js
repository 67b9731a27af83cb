// Verifies webhooks with the Standard Webhooks Node library.
//
// Reads a JSON list of {secret, body, headers} on stdin and prints one
// JSON list of {ok, error, members} in the same order. A webhook whose
// headers hold webhook-batch-size is a batch (docs/receiver-guide.md,
// "Batches"): once the signature over the whole body verifies, its body
// is read as a batch and members lists the member ids in order; a body
// that is not a batch of that many members is not ok. members is empty
// for a single webhook.
"use strict";

const { Webhook } = require("standardwebhooks");

// batchMembers returns the member ids of a verified batch body, checking
// it as a receiver would.
function batchMembers(body, size) {
  const doc = JSON.parse(body);
  if (doc.type !== "batch" || !Array.isArray(doc.data)) {
    throw new Error('not a batch body: want {"type":"batch","data":[…]}');
  }
  if (doc.data.length !== Number(size)) {
    throw new Error(`webhook-batch-size says ${size} members, the body lists ${doc.data.length}`);
  }
  return doc.data.map((m, i) => {
    if (!m.id || !m.type || !m.timestamp) throw new Error(`member ${i} lacks its id, type or timestamp`);
    if (m.payload_base64 === undefined && m.payload === undefined) throw new Error(`member ${i} (${m.id}) has no payload`);
    return m.id;
  });
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((c) => {
    try {
      new Webhook(c.secret).verify(c.body, c.headers);
      const size = Object.entries(c.headers).find(([k]) => k.toLowerCase() === "webhook-batch-size");
      return { ok: true, error: "", members: size ? batchMembers(c.body, size[1]) : [] };
    } catch (e) {
      return { ok: false, error: `${e.name}: ${e.message}`, members: [] };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
