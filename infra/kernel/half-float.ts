/**
 * IEEE 754 half precision (FP16) bits ⇄ JS numbers. Shared by the datatype table
 * (infra/contracts/datatypes.ts: FP16 elements are half bits in a Uint16Array) and everything that
 * reads or writes them through it.
 */
const f64 = new DataView(new ArrayBuffer(8));

/**
 * IEEE half bits of a JS number, rounded to nearest even straight from float64 (going through
 * float32 first would round twice and miss some ties). Overflow → ±inf, NaN → quiet NaN,
 * tiny values → subnormals or ±0.
 */
export function encodeHalf(value: number): number {
  f64.setFloat64(0, value);
  const hi = f64.getUint32(0);
  const sign = (hi >>> 16) & 0x8000;
  const exp = (hi >>> 20) & 0x7ff;
  if (exp === 0x7ff) return sign | (Number.isNaN(value) ? 0x7e00 : 0x7c00);
  const halfExp = exp - 1023 + 15;
  if (halfExp >= 31) return sign | 0x7c00;
  // The 53-bit significand is an exact JS integer; dropping `shift` bits with round-half-even
  // gives the half significand. Normal halves keep 11 bits (implicit 1 included), so the sum
  // below carries into the exponent, and up to infinity, by itself.
  const significand = (hi & 0xfffff) * 2 ** 32 + f64.getUint32(4) + (exp === 0 ? 0 : 2 ** 52);
  if (halfExp >= 1) return sign | (((halfExp - 1) << 10) + roundShift(significand, 42));
  const shift = 1051 - exp; // subnormal half: units of 2^-24
  return shift > 53 ? sign : sign | roundShift(significand, shift);
}

function roundShift(n: number, shift: number): number {
  const unit = 2 ** shift;
  const q = Math.floor(n / unit);
  const rem = n - q * unit;
  const half = unit / 2;
  return rem > half || (rem === half && q % 2 === 1) ? q + 1 : q;
}

/** The JS number that IEEE half bits stand for. */
export function decodeHalf(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exp === 0) return sign * fraction * 2 ** -24;
  if (exp === 31) return fraction === 0 ? sign * Infinity : NaN;
  return sign * (1024 + fraction) * 2 ** (exp - 25);
}
