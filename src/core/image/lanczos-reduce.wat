;; The inner loop of lanczos-reduce.ts in WebAssembly SIMD: libvips's reduceh_uchar_hwy for
;; 3-channel rows (the same int32 sums of int16 weights times pixels, so the same bytes; the
;; JavaScript stays the reference). Compiled by scripts/build-wasm.mjs into
;; lanczos-reduce-wasm.ts; edit here.
(module
  (import "env" "memory" (memory 1))

  ;; For each of `rows` rows (`srcRow` bytes at `src`, already bordered with copied pixels, so no
  ;; tap is clamped here; `outRow` bytes at `out`), `outWidth` output pixels from a plan of two
  ;; i32 per pixel at `plan`: [its first tap's byte offset in the row, its mask's address]. A
  ;; mask is `groups` * 32 bytes: per 4 taps, (c0 c1) repeated 4 times, then (c2 c3) 4 times
  ;; (int16, zero past the real taps), so the weights are loaded ready to multiply. Per group of 4 taps, one
  ;; 16-byte load holds their 12 bytes; two swizzles make int16 pairs (r0 r1 g0 g1 b0 b1 0 0)
  ;; and (r2 r3 ...), i32x4.dot_i16x8_s with (c0 c1 ...) and (c2 c3 ...) sums them per channel.
  ;; Then (+ 2048) >> 12, saturated to 0..255, and 4 bytes stored (the 4th overwritten by the
  ;; next pixel; the caller leaves a byte after the last row). Reads up to 4 bytes past a
  ;; row's last group (the caller pads the rows).
  (func (export "reduceRows") (param $src i32) (param $srcRow i32) (param $out i32) (param $outRow i32) (param $rows i32) (param $plan i32) (param $outWidth i32) (param $groups i32)
    (local $r i32) (local $s i32) (local $o i32) (local $x i32) (local $pl i32) (local $p i32) (local $k i32) (local $g i32)
    (local $acc v128) (local $v v128)
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $s (i32.add (local.get $src) (i32.mul (local.get $r) (local.get $srcRow))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $r) (local.get $outRow))))
        (local.set $x (i32.const 0))
        (local.set $pl (local.get $plan))
        (block $colsDone
          (loop $col
            (br_if $colsDone (i32.ge_u (local.get $x) (local.get $outWidth)))
            (local.set $p (i32.add (local.get $s) (i32.load (local.get $pl))))
            (local.set $k (i32.load offset=4 (local.get $pl)))
            (local.set $acc (v128.const i32x4 2048 2048 2048 2048))
            (local.set $g (local.get $groups))
            (loop $group
              (local.set $v (v128.load (local.get $p)))
              (local.set $acc
                (i32x4.add
                  (i32x4.add
                    (local.get $acc)
                    (i32x4.dot_i16x8_s
                      (i8x16.swizzle (local.get $v) (v128.const i8x16 0 0x80 3 0x80 1 0x80 4 0x80 2 0x80 5 0x80 0x80 0x80 0x80 0x80))
                      (v128.load (local.get $k))))
                  (i32x4.dot_i16x8_s
                    (i8x16.swizzle (local.get $v) (v128.const i8x16 6 0x80 9 0x80 7 0x80 10 0x80 8 0x80 11 0x80 0x80 0x80 0x80 0x80))
                    (v128.load offset=16 (local.get $k)))))
              (local.set $p (i32.add (local.get $p) (i32.const 12)))
              (local.set $k (i32.add (local.get $k) (i32.const 32)))
              (local.set $g (i32.sub (local.get $g) (i32.const 1)))
              (br_if $group (local.get $g)))
            (local.set $v (i32x4.shr_s (local.get $acc) (i32.const 12)))
            (local.set $v (i16x8.narrow_i32x4_s (local.get $v) (local.get $v)))
            (v128.store32_lane 0 (local.get $o) (i8x16.narrow_i16x8_u (local.get $v) (local.get $v)))
            (local.set $o (i32.add (local.get $o) (i32.const 3)))
            (local.set $pl (i32.add (local.get $pl) (i32.const 8)))
            (local.set $x (i32.add (local.get $x) (i32.const 1)))
            (br $col)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))
)
