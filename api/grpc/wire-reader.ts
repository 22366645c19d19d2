/**
 * The protobuf wire format, read: a cursor over one message's bytes (varints, fixed 32/64-bit
 * values, length-delimited fields as views, sub-messages, skipping unknown fields) for the
 * ModelInferRequest decoder (decode.ts). Anything that does not parse is an InvalidInputError
 * (`malformed_message`): the client's bytes, never a crash.
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';

export const VARINT = 0;
export const FIXED64 = 1;
export const LENGTH = 2;
export const START_GROUP = 3;
export const END_GROUP = 4;
export const FIXED32 = 5;

/** A cursor over one message's bytes, [pos, end). */
export class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    /** Moved in by a packed run while its elements are read (varints()), then back. */
    public end: number,
  ) {
    this.pos = start;
  }

  /** A varint's low 32 bits (unsigned), for tags, lengths, int32, uint32 and bool; higher bits are read past. */
  uint32(): number {
    const { buf } = this;
    let byte = this.byte(buf);
    let value = byte & 0x7f;
    if (byte < 0x80) return value;
    byte = this.byte(buf);
    value |= (byte & 0x7f) << 7;
    if (byte < 0x80) return value;
    byte = this.byte(buf);
    value |= (byte & 0x7f) << 14;
    if (byte < 0x80) return value;
    byte = this.byte(buf);
    value |= (byte & 0x7f) << 21;
    if (byte < 0x80) return value;
    byte = this.byte(buf);
    value = (value | ((byte & 0x0f) << 28)) >>> 0;
    if (byte < 0x80) return value;
    // Bits past 32 (a negative int32 is sign-extended to 10 bytes).
    for (let i = 0; i < 5; i++) if (this.byte(buf) < 0x80) return value;
    return malformed('a varint longer than 10 bytes');
  }

  /** A varint as a 64-bit integer: a number when it is a safe integer, else its decimal string. */
  int64(signed: boolean): number | string {
    const { buf } = this;
    // Up to 7 bytes is below 2^49: exact as a number.
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      const byte = this.byte(buf);
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    let big = BigInt(value);
    for (let shift = 49n; shift < 70n; shift += 7n) {
      const byte = this.byte(buf);
      big |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) {
        const n = signed ? BigInt.asIntN(64, big) : BigInt.asUintN(64, big);
        return Number.isSafeInteger(Number(n)) ? Number(n) : n.toString();
      }
    }
    return malformed('a varint longer than 10 bytes');
  }

  /** A length-delimited field's extent, checked against the message's end. */
  length(): number {
    const length = this.uint32();
    if (length > this.end - this.pos) malformed('a field runs past the end of its message');
    return length;
  }

  sub(): Reader {
    const length = this.length();
    const reader = new Reader(this.buf, this.pos, this.pos + length);
    this.pos += length;
    return reader;
  }

  string(): string {
    const length = this.length();
    const start = this.pos;
    this.pos += length;
    return length === 0 ? '' : this.buf.toString('utf8', start, this.pos);
  }

  /** A view into the message (no copy). */
  bytes(): Buffer {
    const length = this.length();
    const start = this.pos;
    this.pos += length;
    return this.buf.subarray(start, this.pos);
  }

  float(): number {
    if (this.end - this.pos < 4) malformed('a float runs past the end of its message');
    const value = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return value;
  }

  double(): number {
    if (this.end - this.pos < 8) malformed('a double runs past the end of its message');
    const value = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return value;
  }

  skip(wireType: number, field: number): void {
    switch (wireType) {
      case VARINT:
        this.uint32();
        return;
      case FIXED64:
        this.advance(8);
        return;
      case LENGTH:
        this.advance(this.length());
        return;
      case FIXED32:
        this.advance(4);
        return;
      case START_GROUP:
        for (;;) {
          if (this.pos >= this.end) malformed(`group ${field} has no end`);
          const tag = this.uint32();
          if ((tag & 7) === END_GROUP) {
            if (tag >>> 3 !== field) malformed(`group ${field} ends as group ${tag >>> 3}`);
            return;
          }
          this.skip(tag & 7, tag >>> 3);
        }
      default:
        malformed(`wire type ${wireType} (field ${field})`);
    }
  }

  private advance(bytes: number): void {
    if (bytes > this.end - this.pos) malformed('a field runs past the end of its message');
    this.pos += bytes;
  }

  private byte(buf: Buffer): number {
    if (this.pos >= this.end) malformed('a varint runs past the end of its message');
    return buf[this.pos++] as number;
  }
}

export function malformed(why: string): never {
  throw new InvalidInputError(
    'malformed_message',
    `the message is not a valid inference.ModelInferRequest (${why}); send it as grpc_predict_v2.proto defines it`,
  );
}
