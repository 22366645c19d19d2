/**
 * Hand-built ModelInferRequest bytes for the gRPC bounds (test/grpc-bounds.test.ts, the hostile
 * chaos scenario's anonymous attacker): the wire format written by hand, so a message can be as
 * costly per byte as an attacker would make it.
 */

/** A protobuf length-delimited field: tag, varint length, bytes. */
export function field(number: number, bytes: Buffer): Buffer {
  const length: number[] = [];
  let n = bytes.length;
  while (n >= 0x80) {
    length.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  length.push(n);
  return Buffer.concat([Buffer.from([(number << 3) | 2, ...length]), bytes]);
}

/** A ModelInferRequest of about `bytes` bytes (model `m`) whose one input's shape is one-byte dimensions: the costliest decode per byte. */
export function shapeSpam(bytes: number): Buffer {
  const name = field(1, Buffer.from('m'));
  const run = Buffer.alloc(bytes - name.length - 16, 1);
  return Buffer.concat([name, field(5, field(3, run))]);
}
