import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newSecret, sign, signatureHeader, webhookHeaders } from './signing.ts';

describe('signing (verified by the standardwebhooks library, as a receiver would)', () => {
  const body = JSON.stringify({ type: 'job.succeeded', data: { id: 'job_1' } });

  it('makes whsec_ secrets of 24 random bytes', () => {
    const a = newSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(24);
    expect(newSecret()).not.toBe(a);
  });

  it('signs what Webhook.verify accepts', () => {
    const secret = newSecret();
    const ts = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders([secret], 'msg_1', ts, body);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(headers['webhook-signature']).toBe(sign(secret, 'msg_1', ts, body));
  });

  it('agrees byte for byte with the library signer', () => {
    const secret = newSecret();
    const ts = 1_700_000_000;
    expect(sign(secret, 'msg_x', ts, body)).toBe(new Webhook(secret).sign('msg_x', new Date(ts * 1000), body));
  });

  it('is refused under another secret or a changed body', () => {
    const ts = Math.floor(Date.now() / 1000);
    const headers = webhookHeaders([newSecret()], 'msg_1', ts, body);
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow();
    const own = newSecret();
    expect(() => new Webhook(own).verify(`${body} `, webhookHeaders([own], 'msg_1', ts, body))).toThrow();
  });

  it('carries one signature per secret during rotation, each verifying alone', () => {
    const [oldSecret, newOne] = [newSecret(), newSecret()];
    const ts = Math.floor(Date.now() / 1000);
    const header = signatureHeader([newOne, oldSecret], 'msg_2', ts, body);
    expect(header.split(' ')).toHaveLength(2);
    const headers = { 'webhook-id': 'msg_2', 'webhook-timestamp': String(ts), 'webhook-signature': header };
    expect(new Webhook(oldSecret).verify(body, headers)).toBeTruthy();
    expect(new Webhook(newOne).verify(body, headers)).toBeTruthy();
  });

  it('needs at least one secret', () => {
    expect(() => signatureHeader([], 'msg', 1, body)).toThrow(/secret/);
  });
});
