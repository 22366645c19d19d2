// A webhook receiver for warmpool's job and bulk-run events, with nothing but Node: it checks each
// delivery's Standard Webhooks signature (https://www.standardwebhooks.com) and its timestamp, and
// prints one line per verified event; a bad signature is answered 401 (warmpool retries, then
// dead-letters it).
//
//   WEBHOOK_SECRET=whsec_… HOOK_PORT=9000 node docs/examples/webhook-receiver.mjs
//
// The secret is the tenant's: GET /v1/webhooks/secret. In production, use a Standard Webhooks
// library (npm `standardwebhooks`, Python `standardwebhooks`, …); this file shows what they check.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
if (!secret?.startsWith('whsec_')) {
  console.error('set WEBHOOK_SECRET to the whsec_… secret from GET /v1/webhooks/secret');
  process.exit(2);
}
const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
const port = Number(process.env.HOOK_PORT ?? 9000);
const TOLERANCE_S = 5 * 60;

/** The signature header holds one `v1,<base64>` per active secret (two during a rotation). */
function verified(id, timestamp, body, header) {
  if (!id || !timestamp || !header) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_S) return false; // a replay
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(' ').some((sig) => {
    const [version, value] = sig.split(',');
    const got = Buffer.from(value ?? '', 'base64');
    return version === 'v1' && got.length === expected.length && timingSafeEqual(got, expected);
  });
}

createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const h = req.headers;
    if (!verified(h['webhook-id'], h['webhook-timestamp'], body, h['webhook-signature'])) {
      res.writeHead(401).end();
      console.log(`refused a delivery with a bad signature (${h['webhook-id']})`);
      return;
    }
    const event = JSON.parse(body);
    res.writeHead(204).end();
    console.log(`verified ${event.type} ${event.data.id} ${event.data.status}`);
  });
}).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/hooks`));
