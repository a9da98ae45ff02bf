/** protobuf's base-128 varint of a non-negative integer (lengths here stay far below 2^53). */
export function varint(value: number): Uint8Array {
  const bytes: number[] = [];
  while (value >= 0x80) {
    bytes.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  bytes.push(value);
  return Uint8Array.from(bytes);
}
