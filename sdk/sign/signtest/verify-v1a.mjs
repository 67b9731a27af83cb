// Verifies Standard Webhooks v1a (ed25519) signatures with Node's own
// crypto, independent of Hookline's Go code. Input on stdin, JSON:
// {publicKey: "whpk_…", id, timestamp, body: base64, signature: header}.
// Exits 0 when one v1a signature of the header verifies, 1 otherwise.
import { createPublicKey, verify } from "node:crypto";
import { readFileSync } from "node:fs";

const m = JSON.parse(readFileSync(0, "utf8"));
if (!m.publicKey.startsWith("whpk_")) {
  console.error("public key must start with whpk_");
  process.exit(2);
}
const raw = Buffer.from(m.publicKey.slice("whpk_".length), "base64");
const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });
const signed = Buffer.concat([Buffer.from(`${m.id}.${m.timestamp}.`), Buffer.from(m.body, "base64")]);
for (const part of m.signature.split(" ")) {
  const [version, sig] = part.split(",", 2);
  if (version === "v1a" && verify(null, signed, key, Buffer.from(sig, "base64"))) {
    console.log("verified");
    process.exit(0);
  }
}
console.error("no v1a signature verifies");
process.exit(1);
