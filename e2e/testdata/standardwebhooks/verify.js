// Verifies webhooks with the Standard Webhooks Node library.
//
// Reads a JSON list of {secret, body, headers} on stdin and prints one
// JSON list of {ok, error} in the same order.
"use strict";

const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((c) => {
    try {
      new Webhook(c.secret).verify(c.body, c.headers);
      return { ok: true, error: "" };
    } catch (e) {
      return { ok: false, error: `${e.name}: ${e.message}` };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
